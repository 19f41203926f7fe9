// swift-tools-version:6.0
// The permissions service: a D-Bus daemon (permissionsd), its client (permissionsctl),
// and its backends, each a separately built dynamic plugin behind one C ABI
// (Sources/CPermissionsPlugin/include/permissions-plugin.h).
import Foundation
import PackageDescription

/// Settings every Swift target shares, added by the loop at the end (swift-log's
/// habit): a target added or moved later gets them without saying so.
/// MemberImportVisibility: a file sees an extension's members (`escapedForMessage`)
/// only from modules it imports itself, so every dependency shows in an import line
/// that ModuleGraphTests can read.
let commonSwiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// For what the daemon and the plugins are built from: no implicit `import
/// _Concurrency` or `import _StringProcessing`, so that neither library (nor
/// _RegexParser, which _StringProcessing needs) is loaded, relocated and kept
/// resident at every start for code that uses neither (doc/performance.md, "The
/// Swift Dispatch overlay, dropped"). Queues come from libdispatch's C API
/// (`SystemPrimitives/Queue.swift`), not from the Dispatch overlay, which needs both.
let withoutConcurrencyOrRegex: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-disable-implicit-concurrency-module-import",
                  "-Xfrontend", "-disable-implicit-string-processing-module-import"]),
]

/// Also for the daemon and the plugins: the metadata of a generic type (a
/// `[String: Int]`, a `Result<UInt64, Failure>`) comes from a direct call to its
/// accessor, with the conformances it needs handed over, not from its mangled name
/// at first use. Made from the name, the runtime demangles it and proves each
/// requirement (`String: Hashable`) by scanning the conformance records of every
/// loaded image, the plugins' too: 13 % of the instructions a start with every
/// plugin ran (doc/performance.md, "Start-up's instructions, counted"). The
/// accessors cost about 2 % more code.
let directGenericMetadata: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"]),
]

/// The package's root, for the linker script path below.
let root = String(#filePath.dropLast("/Package.swift".count))

/// libpipewire's include directories, from its pkg-config file. Not through
/// `pkgConfig:` on the system-library target: that file also asks for
/// `-D_REENTRANT`, which SwiftPM refuses with a warning on every build (and glibc
/// ignores), so only the `-I` flags are taken, at manifest time, with Debian's
/// directories if pkg-config cannot be run.
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
let pipewireCSettings: [CSetting] = [.unsafeFlags(pipewireIncludes)]
let pipewireSwiftSettings: [SwiftSetting] = [.unsafeFlags(pipewireIncludes.flatMap { ["-Xcc", $0] })]

/// A backend plugin: a Swift target under Plugins/<dir> shipped as
/// `libpermissions-<name>.so`, the file name the daemon's loader expects.
func plugin(_ name: String, target: String, dir: String, dependencies: [Target.Dependency] = [],
            exclude: [String] = [], swiftSettings: [SwiftSetting] = []) -> (Product, Target) {
    (.library(name: "permissions-\(name)", type: .dynamic, targets: [target]),
     .target(name: target,
             dependencies: ["PluginKit", "CPermissionsPlugin", "PermissionsModel", "SystemPrimitives"] + dependencies,
             path: "Plugins/\(dir)", exclude: exclude,
             swiftSettings: swiftSettings,
             linkerSettings: [.unsafeFlags(["-Xlinker", "--version-script=\(root)/Plugins/plugin.map"])]))
}

let plugins = [
    plugin("location", target: "LocationPlugin", dir: "Location"),
    plugin("notifications", target: "NotificationsPlugin", dir: "Notifications"),
    plugin("pipewire", target: "PipeWirePlugin", dir: "PipeWire",
           dependencies: ["CPipeWire", "CPipeWireShims", "PipeWireAccess"],
           exclude: ["README.md"], swiftSettings: pipewireSwiftSettings),
    plugin("bluetooth", target: "BluetoothPlugin", dir: "Bluetooth", dependencies: ["DBusKit", "CBluetooth"],
           exclude: ["README.md"]),
    plugin("local-network", target: "LocalNetworkPlugin", dir: "LocalNetwork"),
]

let package = Package(
    name: "permissions",
    products: [
        .executable(name: "permissionsd", targets: ["permissionsd"]),
        .executable(name: "permissionsctl", targets: ["permissionsctl"]),
        // The helper that connects the daemon to users' PipeWire (CAP_DAC_OVERRIDE alone).
        .executable(name: "permissionsd-connector", targets: ["permissionsd-connector"]),
        // The library apps use: statuses, requests and change streams in Swift.
        .library(name: "PermissionsClient", targets: ["PermissionsClient"]),
        // For Benchmarks/ (the benchmarks, a package of their own so that no build of
        // the service compiles them) and nothing else: the underscore says it is no
        // API. What the bench imports; what these depend on comes with them.
        .library(name: "_PermissionsBenchSupport",
                 targets: ["DBusKit", "PermissionsTestSupport", "CLISupport", "CPipeWireShims", "SystemPrimitives"]),
        // For Desktop/ (the GTK programs, a package of their own, so that no build of
        // the service needs GTK) and nothing else: the vocabulary and the escaping the
        // programs show, and the harness their tests start the daemon with.
        .library(name: "_PermissionsDesktopSupport", targets: ["PermissionsModel", "SystemPrimitives"]),
        .library(name: "_PermissionsTestSupport", targets: ["PermissionsTestSupport"]),
    ] + plugins.map(\.0),
    targets: [
        // C libraries from Debian, found through pkg-config.
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CGLib", pkgConfig: "glib-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // libpipewire: its include directories come from `pipewireIncludes` (above).
        .systemLibrary(name: "CPipeWire", providers: [.apt(["libpipewire-0.3-dev"])]),
        // libbluetooth's headers only (HCI structures and constants): no library is
        // linked (Plugins/Bluetooth/HCIDeviceList.swift says why).
        .systemLibrary(name: "CBluetooth", providers: [.apt(["libbluetooth-dev"])]),
        // Wrappers for PipeWire's macro-only API (pw_registry_add_listener, pw_loop_*).
        .target(name: "CPipeWireShims", dependencies: ["CPipeWire"], cSettings: pipewireCSettings),
        // The plugin ABI: one header, plus compile-time layout checks.
        .target(name: "CPermissionsPlugin"),
        // dbus/org.example.Permissions.xml compiled in, for Introspect.
        .target(name: "CPermissionsData", cSettings: [.unsafeFlags(["-std=c23"])]),

        // Scalar code where it is faster: with no 64-bit vector multiply before
        // AVX-512, the SLP vectorizer's SSE2 version of ContentHash's four lanes
        // (cshims_content_hash_blocks) took twice the instructions.
        .target(name: "CShims", cSettings: [.unsafeFlags(["-fno-slp-vectorize"])]),
        // The installed daemon's default directories, written in by scripts/install.
        .target(name: "CInstallPaths"),
        // libstdc++, libswiftCore and libc first among the libraries each program
        // needs. The dynamic loader looks up every symbol a relocation names in
        // that order: libstdc++'s 3 300 relocations at each start, most of them to
        // its own symbols, every library's calls into libc, and the plugins' into
        // the Swift runtime, were looked up behind libdbus, GLib and SQLite
        // (pkg-config's -l flags, which SwiftPM puts first). Their `link`
        // directives reach the linker through the objects' autolink entries, in
        // link order, and CLISupport's objects come before any other Swift
        // module's with a library to link (LinkedLibrariesTests checks the order);
        // imported by Options.swift. One start: 16.0 million instructions before,
        // 15.1 after (doc/performance.md, "Start-up's own work, counted").
        .systemLibrary(name: "CLinkOrder"),
        .target(name: "CLISupport", dependencies: ["CLinkOrder", "CShims", "SystemPrimitives"]),
        // Locks, queues over libdispatch's C API, queue confinement, escaping, errno
        // and the EINTR retry, the clock: Glibc and libdispatch only, so that every
        // target (the plugins too) may use it.
        .target(name: "SystemPrimitives"),
        // A user's own socket (ROOT/UID/NAME) connected only when it is that user's,
        // and the connector's protocol: what the daemon and permissionsd-connector share.
        .target(name: "UserSockets", dependencies: ["SystemPrimitives", "CShims"]),
        .target(name: "DBusKit", dependencies: ["CDBus", "SystemPrimitives"]),
        // The shared vocabulary: status words and precedence, names and their checks,
        // configuration entries, bus names. Imports nothing, so plugins can use it.
        .target(name: "PermissionsModel"),
        // The daemon, one target per concern (Sources/README.md is the module map, and
        // ModuleGraphTests holds these dependencies to it). None of them imports PluginKit.
        // Logging, file reading, inotify: what every part shares.
        .target(name: "PermissionsSupport", dependencies: ["PermissionsModel", "SystemPrimitives"]),
        // Stored decisions: DecisionStore over SQLite.
        .target(name: "PermissionsStore",
                dependencies: ["PermissionsModel", "PermissionsSupport", "SystemPrimitives", "CSQLite"]),
        // Loads, isolates and watches the plugins; keeps each one's snapshots.
        .target(name: "PermissionsPluginHost",
                dependencies: ["PermissionsModel", "PermissionsSupport", "SystemPrimitives", "CPermissionsPlugin",
                               "CShims", "UserSockets"]),
        // Who is calling: credentials, /proc, flatpak/snap, the caller cache.
        .target(name: "PermissionsIdentity",
                dependencies: ["PermissionsModel", "PermissionsSupport", "SystemPrimitives", "DBusKit", "CGLib"]),
        // The configuration files: reading, watching, the daemon's own keys, the last good one.
        .target(name: "PermissionsConfig",
                dependencies: ["PermissionsModel", "PermissionsSupport", "SystemPrimitives", "CGLib"]),
        // The org.example.Permissions object: statuses, methods, signals, requests,
        // prompts, polkit, the named bus errors.
        .target(name: "PermissionsService",
                dependencies: ["PermissionsModel", "PermissionsSupport", "PermissionsStore", "PermissionsIdentity",
                               "SystemPrimitives", "DBusKit", "CPermissionsData"]),
        // The daemon's wiring: start-up order, the configuration applied, signals, exit.
        // A library, so that unit tests can drive the applier without a bus.
        .target(name: "PermissionsDaemon",
                dependencies: ["PermissionsModel", "PermissionsSupport", "PermissionsStore", "PermissionsPluginHost",
                               "PermissionsIdentity", "PermissionsConfig", "PermissionsService", "SystemPrimitives",
                               "DBusKit", "CShims"]),
        // The program: options, --check-config, then PermissionsDaemon.
        .executableTarget(name: "permissionsd",
                          dependencies: ["PermissionsDaemon", "PermissionsModel", "PermissionsSupport",
                                         "PermissionsPluginHost", "PermissionsConfig", "SystemPrimitives", "DBusKit",
                                         "CLISupport", "CInstallPaths", "CShims"]),
        // Connects the daemon to a user's own PipeWire socket when its unit's
        // privileges cannot (doc/threat-model.md, "Reaching each user's PipeWire").
        .executableTarget(name: "permissionsd-connector",
                          dependencies: ["UserSockets", "SystemPrimitives", "CLISupport", "PermissionsModel"]),
        .executableTarget(name: "permissionsctl",
                          dependencies: ["DBusKit", "CLISupport", "PermissionsModel", "PermissionsClient",
                                         "SystemPrimitives"]),
        // The Swift client library for apps (the product PermissionsClient).
        .target(name: "PermissionsClient", dependencies: ["DBusKit", "PermissionsModel", "SystemPrimitives"]),

        // Linked statically into each Swift plugin; never into the daemon.
        .target(name: "PluginKit", dependencies: ["CPermissionsPlugin", "PermissionsModel", "SystemPrimitives"],
                path: "Plugins/PluginKit"),
        // What an app's restricted PipeWire client may reach: pure, so that it is
        // unit-tested apart from the plugin (whose entry point a test cannot link twice).
        .target(name: "PipeWireAccess", path: "Plugins/PipeWireAccess"),

        // What the integration tests and the benches start: a private bus and the
        // daemon under test. A library (not a test target), so that the
        // benchmarks (Benchmarks/) can use it too.
        .target(name: "PermissionsTestSupport"),

        .testTarget(name: "SystemPrimitivesTests", dependencies: ["SystemPrimitives"]),
        .testTarget(name: "DBusKitTests", dependencies: ["DBusKit", "CDBus", "SystemPrimitives"]),
        // Holds the dependencies above to the module map in Sources/README.md.
        .testTarget(name: "ModuleGraphTests"),
        .testTarget(name: "PermissionsCoreTests",
                    dependencies: ["PermissionsModel", "PermissionsSupport", "PermissionsStore", "PermissionsPluginHost",
                                   "PermissionsIdentity", "PermissionsConfig", "PermissionsService",
                                   "PermissionsDaemon", "PermissionsTestSupport", "DBusKit", "SystemPrimitives"]),
        // The BlueZ plugin's pure parts and its HCI seam, without bus or kernel.
        .testTarget(name: "PipeWireAccessTests", dependencies: ["PipeWireAccess"]),
        .testTarget(name: "BluetoothPluginTests",
                    dependencies: ["BluetoothPlugin", "PluginKit", "PermissionsModel", "DBusKit", "SystemPrimitives", "CBluetooth"]),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["DBusKit", "CPermissionsPlugin", "PermissionsTestSupport", "PermissionsClient",
                                   "PermissionsModel", "SystemPrimitives"]),
    ] + plugins.map(\.1),
    swiftLanguageModes: [.v6]
)

// The common settings on every Swift target, whatever its kind or directory (a
// system library has no Swift to compile).
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + commonSwiftSettings
}

// What the daemon and the plugins are linked from: nothing here may use _Concurrency
// or _StringProcessing (`withoutConcurrencyOrRegex`). LinkedLibrariesTests holds the
// daemon's and each plugin's library list to it.
let linkedIntoTheDaemonOrAPlugin = Set([
    "SystemPrimitives", "DBusKit", "PermissionsModel", "PermissionsSupport", "PermissionsStore",
    "PermissionsPluginHost", "PermissionsIdentity", "PermissionsConfig", "PermissionsService", "PermissionsDaemon",
    "permissionsd", "UserSockets", "CLISupport", "PluginKit", "PipeWireAccess",
] + plugins.map(\.1.name))
for target in package.targets where linkedIntoTheDaemonOrAPlugin.contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + withoutConcurrencyOrRegex + directGenericMetadata
}
