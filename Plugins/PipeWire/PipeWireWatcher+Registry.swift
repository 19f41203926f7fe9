// The registry's node events, on the loop's thread. Nothing is logged per node: a
// client that churns nodes would run into the host's log limit, and GetDetails
// lists the devices anyway.
extension PipeWireWatcher {
    /// A global of type Node appeared; `device` is nil unless it is a camera or a
    /// microphone. Before the first listing completes, devices are only collected.
    func nodeAppeared(id: UInt32, device: Device?) {
        guard phase != .unreachable else { return }
        var changed = Set<DevicePermission>()
        // An id is reused only after its global_remove, so this finds nothing; were
        // it ever to, the old node must not stay counted under the new one's id.
        if let old = devices.remove(id: id) { changed.insert(old.permission) }
        if let device {
            devices.insert(device, id: id)
            changed.insert(device.permission)
        }
        if phase == .connected { changed.forEach(publish) }
    }

    func globalRemoved(id: UInt32) {
        guard phase != .unreachable, let old = devices.remove(id: id) else { return }
        if phase == .connected { publish(old.permission) }
    }
}
