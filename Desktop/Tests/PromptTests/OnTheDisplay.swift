import Testing

/// The suites that work the display (PromptTests, SettingsTests,
/// OpenSettingsTests), one test at a time, across suites too: they share one X
/// display and one accessibility bus, so a screenshot of the whole screen would
/// catch another suite's window, and a lookup by application name
/// ("permissions-settings") another test's program. `.serialized` holds for the
/// suites nested in it.
@Suite(.serialized) enum OnTheDisplay {}
