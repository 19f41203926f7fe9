import Foundation
import PermissionsTestSupport

/// The daemon's test gate (PermissionsSupport's TestGate, debug builds), the test's
/// side: a Unix socket this test listens on, named to the daemon by an environment
/// variable (PERMISSIONS_DEBUG_COMMIT_GATE: each commit of the store;
/// PERMISSIONS_DEBUG_CONFIG_GATE: each reading of the configuration after
/// start-up's). Each held operation connects, which is how the test knows one
/// waits, and waits for a byte.
final class TestGateSocket {
    private let listener: Int32
    /// The connection of the operation held (between waitForArrival and release).
    private var held: Int32?

    /// A daemon whose every such operation waits at a gate of its own; `setUp` runs
    /// before it starts.
    static func daemon(config: String, variable: String,
                       setUp: (DaemonUnderTest) throws -> Void = { _ in }) throws -> (DaemonUnderTest, TestGateSocket) {
        let bus = try TestBus()
        // /tmp rather than $TMPDIR: a socket path must fit sun_path's 108 bytes.
        var template = Array("/tmp/test-gate.XXXXXX".utf8CString)
        guard let directory = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
        let gate = try TestGateSocket(path: String(cString: directory) + "/gate")
        let daemon = try DaemonUnderTest(bus: bus, config: config, environment: [variable: gate.path], start: false)
        try setUp(daemon)
        try daemon.start()
        return (daemon, gate)
    }

    let path: String

    private init(path: String) throws {
        self.path = path
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8.prefix($0.count - 1)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 16) == 0 else {
            throw HarnessError(description: "cannot listen on the test gate \(path): errno \(errno)")
        }
    }

    deinit {
        abandon()
        shutdown(listener, Int32(SHUT_RDWR))  // wakes the accept of `openForGood`'s thread
        close(listener)
        unlink(path)
        rmdir((path as NSString).deletingLastPathComponent)
    }

    /// Returns once an operation (`what`, for the failure) waits at the gate (its
    /// connection is accepted), or fails the test after 20 s.
    func waitForArrival(_ what: String) throws {
        guard held == nil else { throw HarnessError(description: "\(what): one is held at the gate already") }
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 20_000) == 1 else { throw HarnessError(description: "\(what) did not come to the gate within 20 s") }
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { throw HarnessError(description: "accept on the test gate: errno \(errno)") }
        _ = fcntl(connection, F_SETFD, FD_CLOEXEC)  // not into the daemons and tools this test starts
        held = connection
    }

    /// Lets the waiting operation go on.
    func release() throws {
        guard let fd = held else { throw HarnessError(description: "nothing is held at the gate") }
        held = nil
        var byte: UInt8 = 1
        let written = write(fd, &byte, 1)
        close(fd)
        guard written == 1 else { throw HarnessError(description: "cannot write to the test gate") }
    }

    /// Releases the held operation, if any, and every one from now on, on a thread
    /// of its own, until the gate goes.
    func openForGood() throws {
        if held != nil { try release() }
        let listener = self.listener
        Thread.detachNewThread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                var byte: UInt8 = 1
                _ = write(connection, &byte, 1)
                close(connection)
            }
        }
    }

    /// Lets go of the held operation's connection without a byte (its daemon is gone).
    func abandon() {
        if let fd = held { close(fd) }
        held = nil
    }
}
