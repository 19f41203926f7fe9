import Foundation
import Testing
import PermissionsTestSupport

/// Once its name is owned, the daemon releases the mappings of the code it ran to
/// get there (CShims' `code_pages.c`): the pages stay in the page cache, and
/// what runs again faults back in. Every other test of the daemon runs after
/// the release; this one shows that it happens, and how much it covers.
@Suite struct StartUpCodeTests {
    @Test func theCodeOfStartUpIsReleasedAndServingGoesOn() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        defer { daemon.stop() }
        let line = try daemon.waitForLog("KiB of code on disk released")
        // "start-up over: the mappings of N KiB of code on disk released"
        let words = line.split(separator: " ")
        let kib = try #require(words.firstIndex(of: "KiB").flatMap { Int(words[$0 - 1]) }, "\(line)")
        // At least libswiftCore's and libc's code, which are on disk wherever the build is.
        #expect(kib > 4096, "\(line)")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }
}
