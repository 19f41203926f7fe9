#if DEBUG
internal import Glibc

/// Debug builds only, for tests: a place where an operation of the daemon (a commit
/// of the store, a reading of the configuration) can be held for as long as a test
/// needs, as a slow disk would hold it. With the environment variable naming a Unix
/// socket the test listens on, each operation, before it begins, connects to it and
/// waits until the test writes a byte (or closes). The test knows that one waits
/// without waiting for time, and each operation is a connection of its own to
/// accept, so two in a row are never taken for one (as they could be with a FIFO,
/// whose next writer may meet the last reader before it has closed).
///
/// Not in release builds: an installed daemon never waits for anyone's socket.
package struct TestGate: Sendable {
    private let path: String

    /// The gate the variable `name` names; nil when it is not set.
    package init?(environment name: String) {
        guard let value = getenv(name) else { return nil }
        path = String(cString: value)
    }

    /// Connects and waits for the test's byte; returns at once if nobody listens.
    package func wait() {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return }
        var byte: UInt8 = 0
        _ = read(fd, &byte, 1)
    }
}
#endif
