import Testing

extension Trait where Self == TimeLimitTrait {
    /// The time limit of a test that waits on daemons and buses: a guard against a
    /// hang, not a measure of speed.
    ///
    /// It is far above the whole suite's run time because swift-testing starts a
    /// test's clock before its body has a thread. The cooperative pool has one
    /// thread per core, and the blocking tests of a parallel run keep them busy, so
    /// on a 2-core machine a test can wait minutes for one. A 2-minute limit was
    /// once exceeded there by a test whose every wait has a 20-second deadline. Those
    /// deadlines (the harness has one on every wait) are what fail a slow step; this
    /// catches only a wait that has none.
    static var hangGuard: Self { .timeLimit(.minutes(15)) }
}
