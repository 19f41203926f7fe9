internal import PermissionsStore
internal import PermissionsSupport

/// Loading a user's decisions into memory the first time they are needed (a call
/// of that uid, an admin call naming it, a prompt's answer to store), so that
/// start-up reads none of them and the users who are not here cost nothing.
///
/// A call of a user not loaded waits for the load (as it waits for its identity)
/// and is then answered from memory, so it is never answered as if there were no
/// decision; a load that fails gives every call waiting on it the error (the
/// service answers StorageFailed), and only that user's: the next call tries again.
///
/// Quotas: one load per user at a time (every call of the user made meanwhile waits
/// on the same one), and at most `concurrentLoads` users' loads handed to the store
/// at once; the others wait their turn here, in the order they came. The reads run
/// off the serving queue (on the store's writer queue, the one SQLite connection's,
/// between commits), so a load never delays an answer another user gets from
/// memory; the bound keeps the writer queue's backlog short, so that a commit
/// waits behind at most that many reads (each one indexed query of one user's rows).
///
/// Confined to the service's queue.
final class UserLoads {
    /// Users' loads handed to the store at once.
    static let concurrentLoads = 4

    private let store: any DecisionStoring
    /// The users whose load is wanted or under way, with what waits for it, in order.
    private var waiters: [UInt32: [(Result<Void, any Error>) -> Void]] = [:]
    /// Users whose load waits for its turn, in the order they came.
    private var queued: [UInt32] = []
    /// Users whose load the store is making.
    private var running: Set<UInt32> = []
    /// Called after a load put a user's rows in memory (before the waiters run).
    var onLoaded: (UInt32) -> Void = { _ in }
    /// Loads made and failed since start, for GetDiagnostics' and the tests' sake.
    private(set) var loadsMade = 0
    private(set) var loadsFailed = 0
    /// The failure last logged for a user, until a load of theirs succeeds: each of
    /// their calls tries a load again, and one damaged row must not make a log
    /// line of every call.
    private var failureLogged: [UInt32: String] = [:]

    init(store: any DecisionStoring) {
        self.store = store
    }

    /// Whether `uid`'s load is wanted or under way.
    func isLoading(_ uid: UInt32) -> Bool { waiters[uid] != nil }

    /// Runs `body` once `uid`'s decisions are in memory: at once if they are,
    /// else when the load ends (with its error if it failed), in the order the
    /// bodies were given.
    func whenLoaded(_ uid: UInt32, _ body: @escaping (Result<Void, any Error>) -> Void) {
        if waiters[uid] == nil, store.isLoaded(uid: uid) { return body(.success(())) }
        if waiters[uid] != nil { return waiters[uid]!.append(body) }
        waiters[uid] = [body]
        queued.append(uid)
        startLoads()
    }

    private func startLoads() {
        while running.count < Self.concurrentLoads, !queued.isEmpty {
            let uid = queued.removeFirst()
            running.insert(uid)
            loadsMade += 1
            store.load(uid: uid) { [weak self] result in self?.finished(uid, result) }
        }
    }

    private func finished(_ uid: UInt32, _ result: Result<Void, any Error>) {
        running.remove(uid)
        let bodies = waiters.removeValue(forKey: uid) ?? []
        switch result {
        case .success:
            failureLogged[uid] = nil
            onLoaded(uid)
        case .failure(let error):
            loadsFailed += 1
            let reason = "\(error)"
            if failureLogged[uid] != reason {
                failureLogged[uid] = reason
                logError("cannot load the decisions of uid \(uid): \(reason); answering its calls StorageFailed "
                         + "(logged again when the reason changes)")
            }
        }
        for body in bodies { body(result) }
        startLoads()
    }
}
