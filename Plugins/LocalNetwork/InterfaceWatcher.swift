import Glibc
internal import SystemPrimitives

/// Follows the kernel's links and addresses: an rtnetlink socket subscribed to
/// link and address changes wakes it, and it then reads the whole list again
/// (getifaddrs), so that a lost or coalesced message (ENOBUFS when the socket's
/// buffer overflows) never leaves it with a stale view.
///
/// `@unchecked Sendable`: `source` and `last` are touched only on `queue`
/// (`start` and `stop` put their work there).
final class InterfaceWatcher: @unchecked Sendable {
    private let queue: Queue
    private let onChange: ([LocalInterface]) -> Void
    private let log: (String) -> Void
    private var source: ReadSource?
    private var last: [LocalInterface]?

    // From <linux/netlink.h> and <linux/rtnetlink.h>, which Glibc's module does not
    // import: NETLINK_ROUTE, and the multicast groups RTMGRP_LINK,
    // RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR.
    static let netlinkRoute: Int32 = 0
    static let groups: UInt32 = 0x1 | 0x10 | 0x100

    /// `onChange` runs on `queue` with the first list and every different one;
    /// with nil when the kernel cannot be followed or read (fail closed).
    init(queue: Queue, onChange: @escaping ([LocalInterface]) -> Void, log: @escaping (String) -> Void) {
        self.queue = queue
        self.onChange = onChange
        self.log = log
    }

    /// Opens the socket, then reads the list: a change between the two is heard.
    /// On the queue.
    func start() {
        queue.assertCurrent()
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
                            | Int32(SOCK_NONBLOCK.rawValue), Self.netlinkRoute)
        guard fd >= 0 else {
            log("local-network: cannot open an rtnetlink socket: \(errnoName(errno)); "
                + "reporting unsupported")
            return report([])
        }
        // struct sockaddr_nl: family (u16), pad (u16), pid (u32, 0: the kernel
        // assigns one), groups (u32).
        var address = [UInt8](repeating: 0, count: 12)
        address.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt16(AF_NETLINK), toByteOffset: 0, as: UInt16.self)
            raw.storeBytes(of: Self.groups, toByteOffset: 8, as: UInt32.self)
        }
        let bound = address.withUnsafeBytes { raw in
            bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        guard bound == 0 else {
            log("local-network: cannot join rtnetlink's link and address groups: \(errnoName(errno)); "
                + "reporting unsupported")
            close(fd)
            return report([])
        }
        let source = ReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [weak self] in self?.readable(fd) }
        source.setCancelHandler { close(fd) }
        self.source = source
        source.resume()
        reread()
    }

    func stop() {
        queue.assertCurrent()
        source?.cancel()
        source = nil
    }

    /// Drains every queued message (their content is not needed: the list is read
    /// again whole), then reads the list once.
    private func readable(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            switch valueOrErrno({ recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) }) {
            case .success(let n) where n > 0: continue
            case .failure(let error) where error.rawValue == ENOBUFS: continue  // overflowed; the re-read covers it
            default: break
            }
            break
        }
        reread()
    }

    private func reread() {
        guard let interfaces = localInterfaces() else {
            log("local-network: cannot read the interface list: \(errnoName(errno)); "
                + "reporting unsupported")
            return report([])
        }
        report(interfaces)
    }

    private func report(_ interfaces: [LocalInterface]) {
        guard interfaces != last else { return }
        last = interfaces
        onChange(interfaces)
    }
}
