// What the device benchmarks (pipewire, bluez, local-network) share: their one
// option, and the directories of a permissionsd with one plugin of the build.
import Foundation
import PermissionsTestSupport

/// `--cycles N` (N > 0), the one option of the device benches that take nothing
/// else (`--smoke`: 3 cycles); any other argument fails the bench with `usage`.
func cyclesOption(_ arguments: [String], default cycles: Int, usage: String) -> Int {
    var cycles = cycles
    var rest = arguments[...]
    while let option = rest.popFirst() {
        switch (option, rest.first) {
        case ("--smoke", _):
            cycles = 3
        case ("--cycles", let value?) where Int(value).map({ $0 > 0 }) == true:
            cycles = Int(value)!
            rest.removeFirst()
        default:
            fail(usage, code: 2)
        }
    }
    return cycles
}

/// The directories a bench's permissionsd runs with under `root` (config, state,
/// plugins, and `extra` ones), with the build's `libpermissions-<plugin>.so` linked
/// into plugins/ as its only plugin.
func makeDaemonDirectories(_ root: String, plugin: String, extra: [String] = []) {
    let fm = FileManager.default
    for dir in extra + ["config", "state", "plugins"] {
        do { try fm.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true) } catch {
            fail("cannot create \(root)/\(dir): \(error)")
        }
    }
    let file = "libpermissions-\(plugin).so"
    guard fm.fileExists(atPath: binDir + "/" + file) else {
        fail("no \(binDir)/\(file): build the package first (PERMISSIONS_BIN_DIR names the build's directory)")
    }
    try? fm.createSymbolicLink(atPath: root + "/plugins/" + file, withDestinationPath: binDir + "/" + file)
}

/// Starts permissionsd (through `wrapper`, e.g. `unshare -n --`, if given) with the
/// directories under `root`, its log in root/permissionsd.log, and waits (20 s at
/// most) until it owns its name on `address`.
func startDaemon(root: String, address: String, environment: [String: String] = [:],
                 wrapper: [String] = [], arguments: [String] = []) -> Child {
    let daemon = [binDir + "/permissionsd", "--address", address, "--config-dir", root + "/config",
                  "--state-dir", root + "/state", "--plugin-dir", root + "/plugins"] + arguments
    let command = wrapper + daemon
    let (child, _) = SpawnSpec(command[0], Array(command.dropFirst()), name: "permissionsd", environment: environment,
                               removing: ["PIPEWIRE_", "DBUS_STARTER_"], log: root + "/permissionsd.log").spawn()
    let status = SpawnSpec("/usr/bin/gdbus", ["wait", "--address", address, "--timeout", "20", "org.example.Permissions"])
        .run()
    guard status == 0 else {
        let log = (try? String(contentsOfFile: root + "/permissionsd.log", encoding: .utf8)) ?? ""
        fail("permissionsd did not take its name; its log:\n\(log)")
    }
    return child
}
