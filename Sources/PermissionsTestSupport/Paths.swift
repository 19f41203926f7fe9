import Foundation

/// Where `swift build` put the binaries: $PERMISSIONS_BIN_DIR (scripts/test sets it),
/// else .build/debug of this checkout.
public let binDir: String = {
    // Resolved, because tests compare it with the executable paths the daemon reads
    // from /proc (which never contain symbolic links).
    if let dir = ProcessInfo.processInfo.environment["PERMISSIONS_BIN_DIR"] {
        return URL(fileURLWithPath: dir).resolvingSymlinksInPath().path
    }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug").path
}()

/// The release build that scripts/test makes beside the debug one
/// ($PERMISSIONS_RELEASE_BIN_DIR): what ships, for measurements of the daemon as
/// installed. Nil when the tests run without scripts/test.
public let releaseBinDir: String? = ProcessInfo.processInfo.environment["PERMISSIONS_RELEASE_BIN_DIR"]
    .map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }

/// A fresh directory with symbolic links to the named plugins of the build in
/// `buildDirectory` (this one's unless told).
public func pluginDirectory(_ prefix: String, with names: [String], from buildDirectory: String = binDir) -> String {
    let dir = try! makeTemporaryDirectory(prefix)
    for name in names {
        let file = "libpermissions-\(name).so"
        try! FileManager.default.createSymbolicLink(atPath: dir + "/" + file,
                                                    withDestinationPath: buildDirectory + "/" + file)
    }
    return dir
}

/// A plugin directory with only the config-driven plugins (location, notifications),
/// so that tests of the core see a fixed set of permissions and no backend that
/// reaches for PipeWire or the system bus. Made once per test process.
public let corePluginDirectory: String = pluginDirectory("core-plugins", with: ["location", "notifications"])

public let packageRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// A fresh directory, removed by `remove()`.
public func makeTemporaryDirectory(_ prefix: String = "permissions-test") throws -> String {
    var template = Array((NSTemporaryDirectory() + "/\(prefix).XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
    return String(cString: made)
}

/// The type of the file system `path` is on, as stat(1) names it ("tmpfs",
/// "overlayfs", "ext2/ext3"): the tests of where the daemon's plugin copies go.
public func fileSystemType(of path: String) throws -> String {
    try run("/usr/bin/stat", ["-f", "-c", "%T", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Throws unless `path` is on a disk: on tmpfs or overlayfs the daemon keeps its
/// plugin copies in memory (PrivateCopy), so a directory there cannot show where
/// they go on a disk.
public func requireDisk(_ path: String) throws {
    let type = try fileSystemType(of: path)
    guard !["tmpfs", "overlayfs"].contains(type) else {
        throw HarnessError(description: "\(path) is on \(type): set TMPDIR to a disk with 32 MiB free")
    }
}
