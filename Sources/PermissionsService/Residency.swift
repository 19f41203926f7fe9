internal import DBusKit
internal import PermissionsStore
internal import PermissionsSupport
internal import SystemPrimitives

/// Which users' decisions stay in memory, and when the others go (the rule of
/// doc/performance.md, "Decisions of users who are not here").
///
/// A user is *here* while the daemon has a reason to answer for them from memory at
/// any moment: an identified connection of that uid on the bus, a subscription, a
/// session grant, a call waiting (for its identity, a load, polkit or a prompt), an
/// open request handle or prompt, or an OpenPipeWireRemote connection (`pinned`).
/// A user who has not been here for `idleMilliseconds` is let go: their rows leave
/// memory (the file keeps them) and the next call that needs them loads them again
/// (UserLoads). Nobody is let go while a write of theirs is in flight (their rows
/// may be about to change: that counts as being here) or while their own load is
/// wanted; another user's writes, however steady, keep nobody else.
///
/// Why these pins: a subscription and an enforced connection are what status
/// signals are computed for without a call (StatusTracker.users: an admin's
/// configuration change, a device that goes), a session grant and a prompt are
/// read when they end; while any holds, the user's rows must be in memory. A
/// user with none of them gets no signal and no answer without a call, and a
/// call loads them first. The connections pin for the memory's sake only: a
/// logged-in user keeps their rows, and only users who are not here go.
///
/// Why 5 minutes by default: a load is one indexed query of one user's rows
/// (about a millisecond for 1 000 of them), so letting go too early costs little;
/// the time is there so that a user whose clients come and go (permissionsctl
/// runs, an admin tool naming them, a login's first apps) is loaded once, not
/// once a connection, while after a logout their rows are gone within minutes.
///
/// Time is counted by a repeating timer (`Timers`: dispatch timers in the daemon, a
/// `ManualClock` in tests), one look every `sweepMilliseconds`.
///
/// Confined to the service's queue.
final class Residency {
    /// The default time a user who is not here keeps their rows in memory.
    static let defaultIdleMilliseconds = 5 * 60 * 1000

    private let store: any DecisionStoring
    private let loads: UserLoads
    let idleMilliseconds: Int
    let sweepMilliseconds: Int
    /// Whether a reason to keep `uid`'s rows holds now (see the type's comment).
    var pinned: (UInt32) -> Bool = { _ in false }
    /// Called after a user was let go.
    var onEvict: (UInt32) -> Void = { _ in }
    /// Milliseconds counted by the sweeps.
    private var now = 0
    /// When each loaded user was last here (or last needed by a call).
    private var lastHere: [UInt32: Int] = [:]
    private var timer: (any ArmedTimer)?
    /// Users let go since start.
    private(set) var evictions = 0

    init(store: any DecisionStoring, loads: UserLoads, idleMilliseconds: Int, sweepMilliseconds: Int? = nil) {
        self.store = store
        self.loads = loads
        self.idleMilliseconds = max(idleMilliseconds, 0)
        // A fifth of the idle time: a user goes at most 20 % after their time.
        self.sweepMilliseconds = max(sweepMilliseconds ?? self.idleMilliseconds / 5, 1)
    }

    /// Starts the sweeps on `queue`, the service's.
    func start(timers: any Timers, queue: Queue) {
        let me = QueueConfined(self)
        timer = timers.schedule(after: sweepMilliseconds, repeating: sweepMilliseconds, on: queue) {
            me.value.sweep()
        }
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }

    /// `uid` was needed now (a call was answered for them).
    func touch(_ uid: UInt32) {
        lastHere[uid] = now
    }

    /// One look: lets go the users loaded who have not been here for the idle time.
    func sweep() {
        now += sweepMilliseconds
        let loaded = store.loadedUsers
        for uid in loaded {
            if loads.isLoading(uid) || pinned(uid) || store.writesInFlight(for: uid) {
                lastHere[uid] = now
                continue
            }
            let since = lastHere[uid] ?? now
            lastHere[uid] = since
            guard now - since >= idleMilliseconds else { continue }
            store.evict(uid: uid)
            lastHere[uid] = nil
            evictions += 1
            onEvict(uid)
        }
        // Users let go some other way leave no entry behind.
        if lastHere.count > loaded.count {
            let kept = Set(loaded)
            lastHere = lastHere.filter { kept.contains($0.key) }
        }
    }
}
