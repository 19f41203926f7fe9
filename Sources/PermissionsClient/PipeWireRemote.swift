import DBusKit
internal import Glibc

extension PermissionsClient {
    /// A connection to this user's own PipeWire that reaches only the devices of
    /// `permission` (`.camera`: video sources; `.microphone`: audio sources), and
    /// only while this app is authorized for it (`OpenPipeWireRemote`): the
    /// moment it is not (the user denies it, an admin locks it, the device is
    /// switched off), the devices vanish from the connection's registry and its
    /// links to them are destroyed; authorized again, they come back.
    ///
    /// Never prompts: `request` first, then open.
    /// - Returns: a socket descriptor this app owns, close-on-exec, for
    ///   `pw_context_connect_fd()` (which takes it over) or `close()`.
    /// - Throws: `.notAuthorized` (the status is not "authorized"; the message
    ///   quotes it), `.notSupported` (no plugin enforces `permission`),
    ///   `.backendUnavailable` (this user's PipeWire is not running),
    ///   `.limitExceeded`, `.unavailable`, ….
    public func openPipeWireRemote(for permission: Permission) async throws(PermissionsClientError) -> Int32 {
        let reply = try await call("OpenPipeWireRemote", [.string(permission.rawValue), .vardict([])])
        guard case .unixFD(let descriptor)? = reply.first else {
            throw PermissionsClientError(.other, name: "org.freedesktop.DBus.Error.InvalidSignature",
                                         message: "OpenPipeWireRemote answered without a file descriptor")
        }
        // The reply's copy closes with it: the app gets one of its own.
        let fd = descriptor.duplicate()
        guard fd >= 0 else {
            throw PermissionsClientError(.other, name: "org.freedesktop.DBus.Error.Failed",
                                         message: "cannot keep the descriptor: \(String(cString: strerror(errno)))")
        }
        return fd
    }
}
