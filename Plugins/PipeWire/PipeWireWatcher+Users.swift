import PipeWireAccess
internal import CPipeWire
internal import CPipeWireShims
internal import Glibc
internal import SystemPrimitives
internal import PluginKit

// Every user's PipeWire, on a daemon that serves many users: a remote per user
// directory under the runtime root, connected when its socket appears. On the
// loop's thread, and once from `start` before it runs.
extension PipeWireWatcher {
    /// Watches the root and lists it. Without a watch (no such directory, no
    /// inotify) no user's PipeWire is followed: every user reads "unsupported".
    /// `announce`: log which sockets are followed (not again after PipeWireStart has).
    func watchUsers(root: String, announce: Bool = true) {
        switch UserRuntimeDirectories.open(root: root) {
        case .failure(let error):
            host.log(.warning, "cannot watch \(root) for users' PipeWire: \(error); camera and microphone are "
                     + "unsupported for every user")
        case .success(let directories):
            if !host.publishesForUsers {
                host.log(.warning, "this daemon cannot take users' own camera and microphone states (no "
                         + "publish_for_user): they stay unsupported for everyone")
            }
            self.directories = directories
            directoriesSource = cpw_loop_add_io(loop, directories.fd, UInt32(SPA_IO_IN), pipewireDirectoriesReadable, me)
            if announce { host.log(.info, Self.followingLine(root: root)) }
            apply(directories.scan())
        }
    }

    static func followingLine(root: String) -> String {
        "following each user's PipeWire at \(root)/UID/\(UserRuntimeDirectories.socketName)"
    }

    /// The inotify fd is readable.
    func directoriesReadable() {
        guard let directories else { return }
        apply(directories.read())
    }

    private func apply(_ events: [UserRuntimeDirectories.Event]) {
        guard let directories else { return }
        for event in events {
            switch event {
            case .userAppeared(let uid):
                let socket = "\(directories.root)/\(uid)/\(UserRuntimeDirectories.socketName)"
                addRemote(.user(uid), socket: socket, backoff: Backoff(attempts: Backoff.userAttempts))
            case .socketAppeared(let uid):
                // A new socket while connected is a restart whose loss is on its way.
                if let remote = remotes[.user(uid)], remote.core == nil { remote.attemptSoon() }
            case .userGone(let uid):
                guard let remote = remotes.removeValue(forKey: .user(uid)) else { continue }
                remote.close()
                host.log(.info, "user \(uid)'s runtime directory is gone: no longer following their PipeWire")
                // Their own state becomes what it is without a PipeWire.
                DevicePermission.allCases.forEach { publish(Target($0, .user(uid))) }
            case .rescan:
                host.log(.warning, "missed changes of \(directories.root) (inotify queue overflow): listing it again")
                apply(directories.scan())
            }
        }
    }
}
