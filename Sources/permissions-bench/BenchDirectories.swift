import Foundation

/// The directory of this executable, where the same build put permissionsd and the plugins.
let benchBinDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().path
}()

/// The directories a bench's permissionsd runs with under `root` (config, state,
/// plugins, and `extra` ones), with the build's `libpermissions-<plugin>.so` linked
/// into plugins/ as its only plugin. `fail` reports a plugin the build lacks.
func makeDaemonDirectories(_ root: String, plugin: String, extra: [String] = [], fail: (String) -> Never) {
    let fm = FileManager.default
    for dir in extra + ["config", "state", "plugins"] {
        try! fm.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
    }
    let file = "libpermissions-\(plugin).so"
    guard fm.fileExists(atPath: benchBinDirectory + "/" + file) else {
        fail("no \(benchBinDirectory)/\(file): build the package first")
    }
    try! fm.createSymbolicLink(atPath: root + "/plugins/" + file, withDestinationPath: benchBinDirectory + "/" + file)
}
