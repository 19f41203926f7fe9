// swift-tools-version:6.0
// The benchmarks of the permissions service (scripts/bench): a package of their own,
// so that building the service never compiles them. They use the service's bus
// layer and test harness through the main package's `_PermissionsBenchSupport`
// product, and run the daemon and plugins of a build of it ($PERMISSIONS_BIN_DIR).
import Foundation
import PackageDescription

/// libpipewire's include directories, from its pkg-config file, as the main
/// package's manifest takes them (only the -I flags: `pkgConfig:` would also bring
/// -D_REENTRANT, which SwiftPM refuses with a warning); Debian's if pkg-config fails.
let pipewireIncludes: [String] = {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/pkg-config")
    process.arguments = ["--cflags-only-I", "libpipewire-0.3"]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    let fallback = ["-I/usr/include/pipewire-0.3", "-I/usr/include/spa-0.2"]
    guard (try? process.run()) != nil else { return fallback }
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let flags = text.split(whereSeparator: \.isWhitespace).map(String.init).filter { $0.hasPrefix("-I") }
    return process.terminationStatus == 0 && !flags.isEmpty ? flags : fallback
}()

let package = Package(
    name: "permissions-benchmarks",
    dependencies: [
        // The checkout this directory is in, whatever its directory is called.
        .package(name: "permissions", path: ".."),
    ],
    targets: [
        .executableTarget(name: "permissions-bench",
                          dependencies: [.product(name: "_PermissionsBenchSupport", package: "permissions")],
                          swiftSettings: [.enableUpcomingFeature("ExistentialAny"),
                                          .enableUpcomingFeature("MemberImportVisibility"),
                                          .unsafeFlags(pipewireIncludes.flatMap { ["-Xcc", $0] })],
                          // The bench is a PipeWire client of its own (fake cameras): it links
                          // libpipewire, which the main package's CPipeWire does not (its
                          // plugin opens libpipewire only once a PipeWire socket exists).
                          linkerSettings: [.linkedLibrary("pipewire-0.3")]),
    ],
    swiftLanguageModes: [.v6]
)
