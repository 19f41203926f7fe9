internal import CPipeWire
internal import CPipeWireShims
internal import Glibc
internal import SystemPrimitives
internal import PluginKit

// Reaching PipeWire and noticing when it goes: all on the loop's thread, except
// tearDownConnection, which `stop` also calls after the thread has been joined.
extension PipeWireWatcher {
    /// The retry timer: tear down a lost connection (not inside its own error
    /// callback, which PipeWire is still running when it reports the loss), then
    /// try again.
    func retryTimerFired() {
        if core != nil { tearDownConnection() }
        attemptConnection()
    }

    /// One attempt, which never blocks: PipeWire's client socket is non-blocking,
    /// and connect(2) to a Unix socket succeeds or fails at once.
    func attemptConnection() {
        // A context loads libpipewire's modules and configuration (about 3 MiB): make
        // it only once there is a socket to connect to.
        if context == nil, let socket = Self.socketPath(), access(socket, F_OK) != 0 {
            return attemptFailed(errno, "PipeWire is not reachable at \(socket)")
        }
        if context == nil {
            // Reads client.conf: the native protocol and client defaults, no RT module.
            context = pw_context_new(loop, nil, 0)
            if context == nil { return attemptFailed(errno, "cannot create a PipeWire context") }
        }
        // NULL properties: libpipewire's own rules, as every client follows them:
        // PIPEWIRE_REMOTE, else pipewire-0, in PIPEWIRE_RUNTIME_DIR or XDG_RUNTIME_DIR.
        guard let core = pw_context_connect(context, nil, 0) else {
            return attemptFailed(errno, "PipeWire is not reachable")
        }
        self.core = core
        let data = me
        coreListener.register { cpw_core_add_listener(core, $0, $1, data) }
        guard let registry = pw_core_get_registry(core, UInt32(PW_VERSION_REGISTRY), 0) else {
            return attemptFailed(errno, "cannot get the PipeWire registry")
        }
        self.registry = registry
        registryListener.register { cpw_registry_add_listener(registry, $0, $1, data) }
        syncSeq = cpw_core_sync(core, UInt32(PW_ID_CORE), 0)
        setPhase(.connecting)
    }

    /// Where libpipewire would connect with no properties given: PIPEWIRE_REMOTE (a
    /// path, or a name), else "pipewire-0", in PIPEWIRE_RUNTIME_DIR, else
    /// XDG_RUNTIME_DIR. nil when that cannot be told (libpipewire then decides).
    static func socketPath() -> String? {
        func env(_ name: String) -> String? {
            getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        let name = env("PIPEWIRE_REMOTE") ?? "pipewire-0"
        if name.hasPrefix("/") { return name }
        guard let directory = env("PIPEWIRE_RUNTIME_DIR") ?? env("XDG_RUNTIME_DIR") else { return nil }
        return directory + "/" + name
    }

    /// Stay unsupported and try again after the next delay.
    private func attemptFailed(_ code: Int32, _ what: String) {
        if !outageLogged {
            outageLogged = true
            host.log(.info, "\(what): \(errnoName(code)); camera and microphone are unsupported "
                     + "until it is; retrying every \(Backoff.limit / 1_000_000_000) s at most")
        }
        if core != nil { tearDownConnection() }
        armRetry(after: backoff.next())
    }

    private func armRetry(after delay: UInt64) {
        if let retryTimer { _ = cpw_loop_arm_timer(loop, retryTimer, delay) }
    }

    /// Errors on the core object that mean the socket is gone (PipeWire reports
    /// them as "connection error"). Others, about a request of ours, are logged and
    /// the connection kept: reconnecting for them would tell every app
    /// "unsupported" for nothing.
    private static let connectionErrors: Set<Int32> = [
        EPIPE, ECONNRESET, ECONNREFUSED, ECONNABORTED, ENOTCONN, ETIMEDOUT, EHOSTDOWN, EIO,
    ]

    func coreError(id: UInt32, res: Int32, message: String) {
        let reason = "\(message): \(errnoName(-res))"
        guard id == UInt32(PW_ID_CORE), Self.connectionErrors.contains(-res) else {
            host.log(.warning, "PipeWire error on object \(id): \(reason)")
            return
        }
        guard phase != .unreachable else { return }
        host.log(.info, "lost the connection to PipeWire: \(reason); camera and microphone are unsupported "
                 + "until it is back")
        outageLogged = true
        devices.removeAll()
        setPhase(.unreachable)
        armRetry(after: 0)  // the teardown, outside this callback, and a first new attempt
    }

    func coreDone(id: UInt32, seq: Int32) {
        guard id == UInt32(PW_ID_CORE), seq == syncSeq, phase == .connecting else { return }
        backoff.reset()
        outageLogged = false
        host.log(.info, "following the PipeWire registry: \(devices.devices(for: .camera).count) camera(s), "
                 + "\(devices.devices(for: .microphone).count) microphone(s)")
        setPhase(.connected)
    }

    /// Removes our listeners and proxies and closes the socket.
    func tearDownConnection() {
        registryListener.unregister()
        coreListener.unregister()
        if let registry { pw_proxy_destroy(registry) }
        registry = nil
        if let core { pw_core_disconnect(core) }
        core = nil
        syncSeq = -1
    }
}
