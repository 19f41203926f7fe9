internal import PermissionsSupport
internal import SystemPrimitives
internal import Glibc

// Enforcement (ABI 1.3): the plugin of a permission opens connections to its
// backend that reach only what the app was allowed, and narrows them when the
// status changes. The host only carries the calls; the service decides.
extension PluginHost {
    /// Whether the plugin serving `permission` enforces it (names it in its
    /// descriptor's `enforced`, with open_remote and remote_status).
    package func enforces(_ permission: String) -> Bool {
        guard let provider = providers[permission], provider.info.state == .loaded else { return false }
        return provider.enforced.contains(permission)
    }

    /// Asks the plugin serving `permission` to open remote `id` for (uid, app):
    /// `done` gets, on the daemon queue, the descriptor (the caller's to close) or a
    /// negative errno: -ENOTSUP when no plugin enforces the permission now,
    /// -ETIMEDOUT when the call has not returned within the deadline, counted from
    /// when it started. It runs off the plugin's call queue, on a queue of its own
    /// (`Queue.runOnItsOwn`; the service bounds how many run at once), beside the
    /// plugin's other calls and opens: a slow backend delays this open alone, and a
    /// late one costs the plugin nothing (its descriptor, when it comes, is
    /// closed: the remote ends).
    /// `returned` is called on the daemon queue once the plugin's call has
    /// returned, whether it settled the open or came after the deadline.
    package func openRemote(id: UInt64, uid: UInt32, pid: UInt32, app: String, permission: String,
                            done: @escaping (Int32) -> Void, returned: @escaping () -> Void) {
        guard enforces(permission), let plugin = providers[permission] else {
            done(-ENOTSUP)
            return returned()
        }
        let settle = Self.firstToSettle()
        let confinedDone = QueueConfined(done)
        let confinedReturned = QueueConfined(returned)
        let deadline = self.deadline
        Queue.runOnItsOwn(label: "plugin.\(plugin.name).open-remote") {
            let started = monotonicNanoseconds()
            self.queue.asyncAfter(deadline: .now() + deadline) {
                if settle.value() { confinedDone.value(-ETIMEDOUT) }
            }
            let fd = plugin.openRemote(id: id, uid: uid, pid: pid, app: app, permission: permission)
            let took = (monotonicNanoseconds() - started) / 1_000_000
            self.queue.async {
                defer { confinedReturned.value() }
                guard settle.value() else {
                    if fd >= 0 { close(fd) }  // given up on: the connection ends, and with it the remote
                    // Until now it held a thread and counted against the user's opens.
                    logWarning("plugin \(plugin.name): open_remote of remote \(id) returned after \(took) ms, "
                               + "past its deadline")
                    return
                }
                // The plugin may have been given up meanwhile: what it opened is not kept.
                guard self.providers[permission] === plugin, plugin.info.state == .loaded else {
                    if fd >= 0 { close(fd) }
                    return confinedDone.value(-ENOTSUP)
                }
                confinedDone.value(fd)
            }
        }
    }

    /// Tells the plugin serving `permission` that remote `id`'s status is now
    /// `status` (a status word). Queued behind its other calls; never waits.
    package func remoteStatus(id: UInt64, permission: String, status: String) {
        guard let plugin = providers[permission], plugin.info.state == .loaded else { return }
        plugin.callQueue.async { plugin.remoteStatus(id: id, status: status) }
    }
}
