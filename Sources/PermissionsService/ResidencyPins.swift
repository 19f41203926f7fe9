internal import DBusKit
internal import PermissionsIdentity
internal import PermissionsStore

/// How long users who are not here keep their decisions in memory (Residency).
package struct ResidencySettings: Sendable {
    package var idleMilliseconds = Residency.defaultIdleMilliseconds
    /// Every this often a look (nil: a fifth of the idle time).
    package var sweepMilliseconds: Int?
    /// Whether a connection or a subscription of the user keeps their rows. Off only
    /// for tests that force evictions in the middle of a run (debug builds,
    /// PERMISSIONS_DEBUG_EVICT_EVERY_MS): then the signals of changes made for
    /// everyone (an admin's configuration) may miss a subscribed user let go.
    package var presencePins = true

    package init(idleMilliseconds: Int = Residency.defaultIdleMilliseconds, sweepMilliseconds: Int? = nil,
                 presencePins: Bool = true) {
        (self.idleMilliseconds, self.sweepMilliseconds, self.presencePins) = (idleMilliseconds, sweepMilliseconds,
                                                                              presencePins)
    }
}

// What keeps a user's decisions in memory (see Residency). Part of
// PermissionsService; confined to its queue.
extension PermissionsService {
    /// Something will read the user's rows without a call to load them first: a
    /// call waiting, a session grant (read when it ends), a prompt or request
    /// handle open (its answer is stored), an enforced PipeWire connection
    /// (followed on every change).
    func holds(_ uid: UInt32) -> Bool {
        pendingCalls.waiting(uid: uid) || broker.hasPrompt(for: uid) || requestHandles.count(uid: uid) > 0
            || tracker.sessionGrants.keys.contains { $0.uid == uid }
            || remotes.byID.values.contains { $0.uid == uid }
    }

    /// The user is on the bus: a connection identified, or a subscription (whose
    /// signals are computed from the rows).
    func isHere(_ uid: UInt32) -> Bool {
        callers.hasConnection(uid: uid) || subscribers.values.contains { $0.uid == uid }
    }
}
