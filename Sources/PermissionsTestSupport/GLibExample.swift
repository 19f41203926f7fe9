import Foundation
import Glibc

/// Builds the C/GLib example app of dbus/examples with its Makefile (its proxy
/// from gdbus-codegen over the interface XML) in a fresh directory; returns the
/// program's resolved path, its app id (the daemon reads executable paths
/// without symbolic links).
public func buildGLibExample() throws -> String {
    let dir = try makeTemporaryDirectory("glib-example")
    for file in ["Makefile", "permissions-example.c"] {
        try FileManager.default.copyItem(atPath: packageRoot + "/dbus/examples/" + file, toPath: dir + "/" + file)
    }
    let made = try run("/usr/bin/make", ["-C", dir, "XML=\(packageRoot)/dbus/org.example.Permissions.xml"])
    guard made.status == 0 else { throw HarnessError(description: "make: \(made.stdout) \(made.stderr)") }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    return String(cString: realpath(dir + "/permissions-example", &buffer))
}
