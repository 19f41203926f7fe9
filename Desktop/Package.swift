// swift-tools-version:6.0
// The desktop programs of the permissions service, on GTK 4 and libadwaita:
// permissions-prompt (the agent that asks the user) and permissions-settings (the
// privacy page). A package of its own, so that
// the daemon, permissionsctl and the client library (the package one directory up)
// build and install on a machine without GTK; this one uses their library and
// test harness through the main package's products.
import Foundation
import PackageDescription

/// GTK's, libadwaita's and gio-unix's include directories, from their pkg-config
/// files. Not through `pkgConfig:` on the system-library target: GTK's file also
/// asks for -pthread, -mfpmath=sse, -msse and -msse2, which SwiftPM refuses with
/// a warning on every build (the main package takes libpipewire's -I flags alone
/// for the same reason). The libraries are named in CAdw's module map.
let gtkIncludes: [String] = pkgConfig(["--cflags-only-I", "libadwaita-1", "gtk4", "gio-unix-2.0", "x11"])
    .filter { $0.hasPrefix("-I") }

/// Xlib, for the shim's XSetTransientForHint (a prompt over an X11 app's window):
/// its libraries from its pkg-config file (`-lX11`).
let x11Libraries: [LinkerSetting] = pkgConfig(["--libs-only-l", "x11"])
    .filter { $0.hasPrefix("-l") }.map { .linkedLibrary(String($0.dropFirst(2))) }

/// What pkg-config prints for `arguments`, split at white space (none if it fails).
func pkgConfig(_ arguments: [String]) -> [String] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/pkg-config")
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    guard (try? process.run()) != nil else { return [] }
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return text.split(whereSeparator: \.isWhitespace).map(String.init)
}
let gtkSwiftSettings: [SwiftSetting] = [.unsafeFlags(gtkIncludes.flatMap { ["-Xcc", $0] })]

let commonSwiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "permissions-desktop",
    products: [
        .executable(name: "permissions-prompt", targets: ["permissions-prompt"]),
        .executable(name: "permissions-settings", targets: ["permissions-settings"]),
    ],
    dependencies: [
        // The checkout this directory is in, whatever its directory is called.
        .package(name: "permissions", path: ".."),
    ],
    targets: [
        // libadwaita, GTK 4 and GIO (GDBus, GDesktopAppInfo), from Debian 12
        // (GTK 4.8, libadwaita 1.2): include directories from `gtkIncludes`.
        .systemLibrary(name: "CAdw", providers: [.apt(["libadwaita-1-dev", "libgtk-4-dev"])]),
        // What Swift cannot call: g_signal_connect (a macro) with typed handlers,
        // gtk_accessible_update_property (varargs), and GDK's X11 and Wayland
        // calls that make a dialog transient for another program's window.
        .target(name: "CAdwShims", dependencies: ["CAdw"], cSettings: [.unsafeFlags(gtkIncludes)],
                linkerSettings: x11Libraries),
        // What both desktop programs share: GTK from Swift, gettext, the bus.
        .target(name: "DesktopSupport",
                dependencies: ["CAdw", "CAdwShims",
                               .product(name: "PermissionsClient", package: "permissions"),
                               .product(name: "_PermissionsDesktopSupport", package: "permissions")],
                swiftSettings: gtkSwiftSettings),
        .executableTarget(name: "permissions-prompt",
                          dependencies: ["DesktopSupport", "CAdw", "CAdwShims",
                                         .product(name: "_PermissionsDesktopSupport", package: "permissions")],
                          swiftSettings: gtkSwiftSettings),
        .executableTarget(name: "permissions-settings",
                          dependencies: ["DesktopSupport", "CAdw",
                                         .product(name: "_PermissionsDesktopSupport", package: "permissions")],
                          swiftSettings: gtkSwiftSettings),
        // A stand-in app for the tests: PermissionsClient.openSettings() from a
        // process of its own, whose app id the service takes it for.
        .executableTarget(name: "open-settings-app",
                          dependencies: [.product(name: "PermissionsClient", package: "permissions")],
                          path: "Tests/OpenSettingsApp"),
        // Under Xvfb, driven through AT-SPI (Tests/with-display.sh starts both).
        .testTarget(name: "PromptTests",
                    dependencies: ["open-settings-app",
                                   .product(name: "_PermissionsTestSupport", package: "permissions")]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + commonSwiftSettings
}
