internal import SystemPrimitives

/// The order in which loadAll's names are mapped (dlopen): name `i`'s dlopen starts
/// once names `0..<i` are done with theirs, however their reads raced.
///
/// - One after another, because glibc holds one lock for a whole dlopen (side by
///   side would gain nothing), and because a plugin whose constructor never
///   returns holds that lock for good: in directory order it costs only the
///   names after it (PluginLoadingTests).
/// - A name is done with its turn when its copy will serve it: its dlopen
///   returned, it was not refused, and it claims no permission a name before it
///   claimed (`mapped`). Then the turn passes at once, from `mapper`'s thread
///   (below). On the daemon queue, where it passed before, it waited for whatever
///   that queue was doing (the bus's Hello, the service being made), up to 0.8 ms
///   a plugin, which start-up then waited for (doc/performance.md).
/// - Otherwise the name keeps its turn until it has claimed with another copy, or
///   given up (`over`): its next copy, in a later directory, maps in the same
///   turn, not beside a later name whose constructor may hold the lock.
/// - Which plugin claims a permission first is still decided in directory order,
///   on the daemon queue (`ClaimTurns`); what `mapped` foresees of it holds because
///   the names before have all mapped and claimed, or given up, by then.
/// - The dlopens are made from one thread, `mapper`'s, each in its plugin's call
///   queue (PluginHost.call's `through`): a turn passed to a name that is ready
///   runs next on the thread that passed it; handing it to the name's own
///   call queue woke another thread for each, 0.1 to 0.3 ms a plugin on a busy
///   2-core VM, in the middle of start-up's longest chain (doc/performance.md).
///   A constructor that never returns holds `mapper` for good, as it holds the
///   loader's lock: the names after it could not map anyway, and those before it
///   have mapped, their call queues free.
///
/// Used from the daemon queue and the plugins' call queues: its state is behind a
/// lock, and the work it holds runs outside it.
final class MappingTurns: Sendable {
    /// Where the dlopens are made from, one after another.
    let mapper = Queue(label: "org.example.Permissions.plugin-mapping")

    private struct State: Sendable {
        var order = TurnOrder<@Sendable () -> Void>()
        /// The permissions of the names that are done and serve.
        var claimed = Set<String>()
    }

    private let state = Locked(State())

    /// Runs `map` now if name `index`'s turn has come (or passed), else once it
    /// does, on the thread that passes the turn.
    func when(_ index: Int, _ map: @escaping @Sendable () -> Void) {
        state.withLock { $0.order.take(index, map) }?()
    }

    /// Name `index`'s dlopen returned: with the permissions its copy declares, or
    /// nil if the copy was refused. The turn passes now if that copy will serve the
    /// name (then true); if not, the name keeps it until `over`.
    @discardableResult
    func mapped(_ index: Int, permissions: Set<String>?) -> Bool {
        let (serves, ready): (Bool, (@Sendable () -> Void)?) = state.withLock { state in
            guard index == state.order.next, let permissions, state.claimed.isDisjoint(with: permissions) else {
                return (false, nil)
            }
            state.claimed.formUnion(permissions)
            return (true, state.order.pass(index))
        }
        ready?()
        return serves
    }

    /// Name `index` claimed `permissions` (with whichever copy), or gave up (none):
    /// its turn, when it comes, passes. Nothing for a turn passed already.
    func over(_ index: Int, claiming permissions: [String] = []) {
        let ready: (@Sendable () -> Void)? = state.withLock { state in
            guard index >= state.order.next else { return nil }
            state.claimed.formUnion(permissions)
            return state.order.pass(index)
        }
        ready?()
    }
}
