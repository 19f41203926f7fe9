/// Substring search without `_StringProcessing`, where `String.contains(_:)` and
/// `firstRange(of:)` live (the daemon and the plugins are built without it: see
/// `Queue.swift`). Compares UTF-8 code units, as the daemon's names and messages
/// are compared everywhere else: no Unicode normalisation.
extension StringProtocol {
    /// Where `text` first occurs, or nil; an empty `text` occurs at the start.
    public func firstOccurrence(of text: some StringProtocol) -> Range<Index>? {
        let haystack = utf8, needle = Array(text.utf8)
        guard let first = needle.first else { return startIndex..<startIndex }
        var start = haystack.startIndex
        while let found = haystack[start...].firstIndex(of: first) {
            var end = found, matched = 0
            while matched < needle.count, end != haystack.endIndex, haystack[end] == needle[matched] {
                haystack.formIndex(after: &end)
                matched += 1
            }
            if matched == needle.count { return found..<end }
            start = haystack.index(after: found)
        }
        return nil
    }

    /// Whether `text` occurs anywhere.
    public func containsText(_ text: some StringProtocol) -> Bool { firstOccurrence(of: text) != nil }
}
