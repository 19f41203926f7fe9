internal import SystemPrimitives

/// The order in which loadAll's names are mapped (dlopen): name `i`'s dlopen starts
/// once names `0..<i` have had theirs return, or have given up, however their reads
/// raced.
///
/// - One after another, because glibc holds one lock for a whole dlopen (side by
///   side would gain nothing), and because a plugin whose constructor never
///   returns holds that lock for good: in directory order it costs only the
///   names after it (PluginLoadingTests).
/// - The turn passes where a dlopen returns, on that plugin's own call queue, not
///   on the daemon queue: there it waited for whatever that queue was doing (the
///   bus's Hello, the service being made), up to 0.8 ms a plugin, which start-up
///   then waited for (doc/performance.md).
/// - Which plugin claims a permission first is still decided in directory order,
///   on the daemon queue (`ClaimTurns`).
///
/// Used from the daemon queue and the plugins' call queues: its state is behind a
/// lock, and the work it holds runs outside it.
final class MappingTurns: Sendable {
    private struct State: Sendable {
        /// The name whose turn it is.
        var next = 0
        /// Names done with their turn, from `next` on.
        var over = Set<Int>()
        /// Mappings that came before their turn, by name index.
        var waiting: [Int: @Sendable () -> Void] = [:]
    }

    private let state = Locked(State())

    /// Runs `map` now if name `index`'s turn has come (or passed: a later copy of a
    /// name whose first copy was refused), else once it does, on the thread that
    /// passes the turn.
    func when(_ index: Int, _ map: @escaping @Sendable () -> Void) {
        let now = state.withLock { state in
            if index <= state.next { return true }
            state.waiting[index] = map
            return false
        }
        if now { map() }
    }

    /// Name `index` is done with its turn (its dlopen returned, or it will not
    /// map anything): the next waiting mapping, if its turn has come, runs here.
    func over(_ index: Int) {
        let ready: (@Sendable () -> Void)? = state.withLock { state in
            guard index >= state.next else { return nil }
            state.over.insert(index)
            while state.over.remove(state.next) != nil {
                state.next += 1
                if let map = state.waiting.removeValue(forKey: state.next) { return map }
            }
            return nil
        }
        ready?()
    }
}
