internal import DBusKit

/// Method calls that may still be waiting for an answer (for the bus, polkit or an
/// agent), so that shutdown can answer every one of them.
///
/// Held weakly: whatever a call waits for holds it, and lets it go once it has
/// been answered. A call still alive may have been answered already; answering it
/// again does nothing (`MethodCall` answers once).
///
/// Confined to the service queue.
struct WaitingCalls {
    private struct Entry {
        weak var call: MethodCall?
    }
    private var entries: [Entry] = []
    /// Entries whose call has gone are dropped when the list reaches this length,
    /// which then becomes twice what is left: amortised O(1) per call.
    private var pruneAt = 64

    mutating func add(_ call: MethodCall) {
        if entries.count >= pruneAt {
            entries.removeAll { $0.call == nil }
            pruneAt = max(64, 2 * entries.count)
        }
        entries.append(Entry(call: call))
    }

    /// The calls someone still holds.
    var held: [MethodCall] { entries.compactMap(\.call) }
}
