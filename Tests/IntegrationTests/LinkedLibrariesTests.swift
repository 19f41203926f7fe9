import Foundation
import Testing
import PermissionsTestSupport

/// What the daemon and each plugin load at every start: never the Swift
/// libraries of the Dispatch overlay, concurrency or regular expressions, which
/// none of them uses (Package.swift, `withoutConcurrencyOrRegex`). A new
/// `import Dispatch`, or a `"a".contains("bc")` that brings _StringProcessing back
/// through an implicit import, fails here by the library's name. Nor
/// Synchronization (SystemPrimitives' Locked does its work), nor libbluetooth (the
/// bluetooth plugin asks the kernel itself): each was one more library found,
/// mapped and relocated within the plugins' dlopens, which start-up waits for.
@Suite struct LinkedLibrariesTests {
    static let unwanted = ["libswiftDispatch.so", "libswift_Concurrency.so", "libswift_StringProcessing.so",
                           "libswift_RegexParser.so", "libswiftSynchronization.so", "libbluetooth.so"]
    static let programs = ["permissionsd", "libpermissions-bluetooth.so", "libpermissions-local-network.so",
                           "libpermissions-location.so", "libpermissions-notifications.so",
                           "libpermissions-pipewire.so"]

    @Test(arguments: programs) func loadsNoneOfTheOverlaysLibraries(_ name: String) throws {
        for directory in [binDir] + (releaseBinDir.map { [$0] } ?? []) {
            let path = directory + "/" + name
            let ldd = try run("/usr/bin/ldd", [path])
            #expect(ldd.status == 0, "\(path): \(ldd.stderr)")
            // The libraries it does need are listed: the output is ldd's real list.
            #expect(ldd.stdout.contains("libdispatch.so"), "\(path): \(ldd.stdout)")
            #expect(ldd.stdout.contains("libswiftCore.so"), "\(path): \(ldd.stdout)")
            for library in Self.unwanted {
                #expect(!ldd.stdout.contains(library), "\(path) loads \(library):\n\(ldd.stdout)")
            }
        }
    }

    /// The daemon needs libstdc++, libswiftCore and libc before any other library, the order
    /// the dynamic loader searches for each relocation's symbol (Package.swift,
    /// "CLinkOrder"): a new Swift module linked before CLISupport with a library
    /// of its own to link, or a change in how the toolchain orders them, would
    /// put libdbus first again, and each start back at 0.8 million more
    /// instructions.
    @Test func theDaemonNeedsLibstdcxxSwiftCoreAndLibcFirst() throws {
        for directory in [binDir] + (releaseBinDir.map { [$0] } ?? []) {
            let path = directory + "/permissionsd"
            let dynamic = try run("/usr/bin/readelf", ["--dynamic", "--wide", path])
            #expect(dynamic.status == 0, "\(path): \(dynamic.stderr)")
            let needed = dynamic.stdout.split(separator: "\n").filter { $0.contains("(NEEDED)") }.compactMap { line in
                line.split(separator: "[").last?.split(separator: "]").first.map(String.init)
            }
            #expect(needed.count > 3, "\(path): \(dynamic.stdout)")
            #expect(Array(needed.prefix(3)) == ["libstdc++.so.6", "libswiftCore.so", "libc.so.6"],
                    "\(path) needs, in order: \(needed)")
        }
    }
}
