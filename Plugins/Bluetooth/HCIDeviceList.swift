import CBluetooth
import Glibc
import SystemPrimitives

/// The kernel's HCI device list: what the bus cannot say while bluetoothd is not
/// running. "Powered" is the device's HCI_UP flag.
///
/// Asked with the kernel's own two ioctls (HCIGETDEVLIST, HCIGETDEVINFO) on an HCI
/// socket, with libbluetooth's headers for the structures but not its library:
/// `hci_devinfo` and `ba2str` are all it was linked for, and the library was
/// found, mapped and relocated at every start, within the plugins' dlopens, which
/// start-up waits for one after another.
///
/// Everything here answers from kernel memory (no HCI command reaches the
/// controller), so it does not block. A kernel without Bluetooth fails the first
/// call, `socket`, with EAFNOSUPPORT; one with Bluetooth but no adapter lists none.
struct HCIDeviceList: KernelAdapterProbe {
    func probe() -> KernelProbeResult {
        let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard fd >= 0 else { return .fromErrno(errno) }
        defer { close(fd) }
        let ids: [UInt16]
        switch deviceIDs(fd) {
        case .success(let list): ids = list
        case .failure(let code): return .fromErrno(code.rawValue)
        }
        var adapters: [Adapter] = []
        for id in ids {
            var info = hci_dev_info()
            info.dev_id = id
            guard ioctl(fd, hciGetDeviceInfo, &info) >= 0 else {
                if errno == ENODEV { continue }  // unplugged since the list was read
                return .fromErrno(errno)
            }
            adapters.append(Self.adapter(info))
        }
        return .adapters(adapters)
    }

    /// HCIGETDEVLIST: `struct hci_dev_list_req` is a count followed by a flexible
    /// array of `struct hci_dev_req`, which Swift cannot import, so it is laid out
    /// by hand in a raw buffer.
    private func deviceIDs(_ fd: Int32) -> Result<[UInt16], Errno> {
        let entry = MemoryLayout<hci_dev_req>.self
        let firstEntry = (MemoryLayout<UInt16>.size + entry.alignment - 1) / entry.alignment * entry.alignment
        let capacity = Int(HCI_MAX_DEV)
        let size = firstEntry + capacity * entry.stride
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: entry.alignment)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        buffer.storeBytes(of: UInt16(capacity), as: UInt16.self)
        guard ioctl(fd, hciGetDeviceList, buffer) >= 0 else { return .failure(.current) }
        let count = min(Int(buffer.load(as: UInt16.self)), capacity)
        return .success((0..<count).map { i in
            buffer.load(fromByteOffset: firstEntry + i * entry.stride, as: hci_dev_req.self).dev_id
        })
    }

    private static func adapter(_ info: hci_dev_info) -> Adapter {
        var info = info
        let name = withUnsafeBytes(of: info.name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let address = Self.text(of: info.bdaddr)
        return Adapter(path: name, address: address, name: name,
                       powered: hci_test_bit(Int32(HCI_UP), &info.flags) != 0)
    }

    /// A device address as BlueZ writes it ("00:1A:7D:DA:71:13", as `ba2str`
    /// does): the bytes, stored least significant first, from the last, in
    /// capital hexadecimal.
    static func text(of address: bdaddr_t) -> String {
        withUnsafeBytes(of: address.b) { bytes in
            bytes.reversed().map { byte in
                let digits = String(byte, radix: 16, uppercase: true)
                return byte < 16 ? "0" + digits : digits
            }.joined(separator: ":")
        }
    }
}

/// `HCIGETDEVLIST` and `HCIGETDEVINFO`, `_IOR('H', 210, int)` and `_IOR('H', 211,
/// int)` in <bluetooth/hci.h>: Swift does not import function-like macros, so the
/// encoding of <asm-generic/ioctl.h> (read direction 2 in bits 30-31, argument
/// size in bits 16-29, type, number) is spelt out. Architectures with another
/// ioctl layout (powerpc, mips, sparc) would need their own values.
let hciGetDeviceList = hciRead(210)
let hciGetDeviceInfo = hciRead(211)

private func hciRead(_ number: UInt) -> UInt {
    UInt(2) << 30 | UInt(MemoryLayout<Int32>.size) << 16 | UInt(UInt8(ascii: "H")) << 8 | number
}
