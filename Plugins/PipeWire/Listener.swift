internal import CPipeWire

/// A PipeWire listener's hook and event table, at fixed heap addresses.
///
/// PipeWire keeps pointers to both for as long as the listener is registered, so
/// neither may live in a Swift variable that can move (pitfall S2 of TESTENV).
final class Listener<Events> {
    let hook: UnsafeMutablePointer<spa_hook>
    let events: UnsafeMutablePointer<Events>
    private(set) var isRegistered = false

    init(_ events: Events) {
        hook = .allocate(capacity: 1)
        hook.initialize(to: spa_hook())
        self.events = .allocate(capacity: 1)
        self.events.initialize(to: events)
    }

    /// Registers through `add(hook, events)` (one of the cpw_*_add_listener shims).
    func register(_ add: (UnsafeMutablePointer<spa_hook>, UnsafeMutablePointer<Events>) -> Int32) {
        precondition(!isRegistered, "Listener registered twice")
        _ = add(hook, events)
        isRegistered = true
    }

    /// Unlinks the hook so that no more events arrive; safe to call when not registered.
    func unregister() {
        guard isRegistered else { return }
        spa_hook_remove(hook)
        hook.pointee = spa_hook()
        isRegistered = false
    }

    deinit {
        unregister()
        hook.deinitialize(count: 1)
        hook.deallocate()
        events.deinitialize(count: 1)
        events.deallocate()
    }
}
