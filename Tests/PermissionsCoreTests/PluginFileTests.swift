import Foundation
import Testing
@testable import PermissionsPluginHost

/// The pure parts of reading a plugin file: the ELF bounds check that keeps a
/// truncated library (an interrupted copy) away from dlopen, where touching a page
/// past the end of the file would be a SIGBUS, and the content hash.
@Suite struct PluginFileTests {
    static let library: [UInt8] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let bin = ProcessInfo.processInfo.environment["PERMISSIONS_BIN_DIR"] ?? root + "/.build/debug"
        return Array((try? Data(contentsOf: URL(fileURLWithPath: bin + "/libpermissions-location.so"))) ?? Data())
    }()

    @Test func aWholeLibraryPassesAndATruncatedOneIsRefused() throws {
        try #require(Self.library.count > 4096)
        #expect(ELFCheck.problem(Self.library) == nil)
        // Cut inside the first segment (headers, symbols, code: far more than 8 KiB).
        // A cut past the last segment is harmless, as dlopen maps nothing from there.
        #expect(ELFCheck.problem(Array(Self.library.prefix(8192))) == "truncated: a segment ends past the end of the file")
        #expect(ELFCheck.problem(Array(Self.library.prefix(100))) == "truncated: program headers past the end")
        #expect(ELFCheck.problem(Array("not a library, just some text that is long enough to have a header".utf8))
                == "not an ELF file")
        #expect(ELFCheck.problem([]) == "not an ELF file")
    }

    @Test func theHashFollowsTheContent() {
        let a = Self.library
        var b = a
        b[b.count / 2] ^= 1
        #expect(ContentHash.of(a) == ContentHash.of(a))
        #expect(ContentHash.of(a) != ContentHash.of(b))
        // The length counts: a file grown by zeros is another file.
        #expect(ContentHash.of([1, 2, 3]) != ContentHash.of([1, 2, 3, 0]))
        #expect(ContentHash.of([]) != ContentHash.of([0]))
    }
}
