import Glibc

// The seam between the plugin and the kernel's HCI device list. The follower asks a
// `KernelAdapterProbe` whenever bluetoothd is not on the bus; production uses
// `HCIDeviceList` (the kernel's HCI ioctls), tests a double. The errno policy lives here, in one
// pure function, so that it can be tested without a kernel that has Bluetooth.

/// What the kernel said.
enum KernelProbeResult: Equatable, Sendable {
    /// The kernel's HCI devices (possibly none).
    case adapters([Adapter])
    /// The kernel has no Bluetooth at all (EAFNOSUPPORT): nothing will appear
    /// until a module is loaded, so there is no point asking again soon.
    case noKernelSupport
    /// Something else went wrong (EPERM from a seccomp filter, EMFILE, …); the
    /// errno, for the log.
    case failed(Int32)

    /// The adapters this result means. Every failure means "no adapter": the
    /// status then says `unsupported`, which is what an app can do with it.
    var adapters: [Adapter] {
        if case .adapters(let list) = self { return list }
        return []
    }

    /// Classifies the errno of a failed HCI socket or ioctl call.
    ///
    /// - EAFNOSUPPORT: no Bluetooth in the kernel.
    /// - ENODEV: a Bluetooth-capable kernel with no adapter (what BlueZ's
    ///   `lib/hci.c` returns when the list is empty), or one that went away
    ///   between listing and asking about it.
    static func fromErrno(_ code: Int32) -> KernelProbeResult {
        switch code {
        case EAFNOSUPPORT, EPROTONOSUPPORT: .noKernelSupport
        case ENODEV: .adapters([])
        default: .failed(code)
        }
    }
}

/// Lists the kernel's Bluetooth adapters. Must not block: it is called on the
/// plugin's queue (HCI ioctls answer from kernel memory, without the controller).
protocol KernelAdapterProbe: Sendable {
    func probe() -> KernelProbeResult
}
