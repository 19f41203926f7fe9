import Foundation
import Testing
import PermissionsTestSupport

/// Once its name is owned, the daemon releases the mappings of the code it ran to
/// get there (CShims' `code_pages.c`): the pages stay in the page cache, and
/// what runs again faults back in. Every other test of the daemon runs after
/// the release; these show that it happens, how much it covers, and that a page
/// of code that is the process's own, not the file's, is kept.
@Suite struct StartUpCodeTests {
    static let released = "KiB of code on disk released"

    @Test func theCodeOfStartUpIsReleasedAndServingGoesOn() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        defer { daemon.stop() }
        let line = try daemon.waitForLog(Self.released)
        // "start-up over: the mappings of N KiB of code on disk released"
        let words = line.split(separator: " ")
        let kib = try #require(words.firstIndex(of: "KiB").flatMap { Int(words[$0 - 1]) }, "\(line)")
        // At least libswiftCore's and libc's code, which are on disk wherever the build is.
        #expect(kib > 4096, "\(line)")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }

    /// Code copied into anonymous memory over its own mapping, as large-page text
    /// remappers do (iodlr's liblppreload, `node --use-largepages`): the file is
    /// on a disk, but the pages are the process's own, and released they would
    /// read as zeros. (Before: the daemon crashed at its next call. A breaker
    /// helper's finding.)
    @Test func codeRemappedToAnonymousMemoryIsKept() throws {
        let preload = try Self.compilePreload("""
            #define _GNU_SOURCE
            #include <link.h>
            #include <stdlib.h>
            #include <string.h>
            #include <sys/mman.h>
            #include <unistd.h>
            static int remap(struct dl_phdr_info *info, size_t size, void *data) {
                (void)size; (void)data;
                if (info->dlpi_name && info->dlpi_name[0]) return 0;  /* the executable only */
                uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
                for (int i = 0; i < info->dlpi_phnum; i++) {
                    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
                    uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
                    uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
                    void *copy = malloc(end - start);
                    memcpy(copy, (void *)start, end - start);
                    if (mmap((void *)start, end - start, PROT_READ | PROT_WRITE,
                             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) abort();
                    memcpy((void *)start, copy, end - start);
                    mprotect((void *)start, end - start, PROT_READ | PROT_EXEC);
                    free(copy);
                }
                return 1;
            }
            __attribute__((constructor)) static void remap_text(void) { dl_iterate_phdr(remap, NULL); }
            """, name: "anonymous-text")
        defer { try? FileManager.default.removeItem(atPath: preload.directory) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, environment: ["LD_PRELOAD": preload.library])
        defer { daemon.stop() }
        _ = try daemon.waitForLog(Self.released)
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n", "\(daemon.log)")
        #expect(daemon.isRunning)
    }

    /// A code segment that ends in zero-initialised bytes the file does not hold
    /// (p_memsz beyond p_filesz): the loader zero-fills the rest of the page
    /// holding the file's last byte, so that page is the process's own. Released,
    /// it would fault back in with the file's next bytes. The library checks its
    /// zeros when the test asks (DIR/check) and says what it found. (Before: "80
    /// bytes are not zero". A breaker helper's finding.)
    @Test func theZeroFilledTailOfACodeSegmentIsKept() throws {
        let directory = try makeTemporaryDirectory("zero-tail-marks")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let preload = try Self.compilePreload("""
            #include <pthread.h>
            #include <stdio.h>
            #include <unistd.h>
            __attribute__((section(".xbss,\\"a\\",@nobits#"), used)) static unsigned char zeros[16384];
            static void *watch(void *arg) {
                (void)arg;
                /* The fixture's own wait for the test's request (at most 60 s). */
                for (int i = 0; i < 6000 && access("\(directory)/check", F_OK) != 0; i++) usleep(10000);
                int n = 0;
                for (size_t i = 0; i < sizeof zeros; i++) n += zeros[i] != 0;
                fprintf(stderr, "zero-tail: %d bytes that should be zero are not\\n", n);
                return NULL;
            }
            __attribute__((constructor)) static void start(void) {
                pthread_t thread;
                pthread_create(&thread, NULL, watch, NULL);
                pthread_detach(thread);
            }
            """, name: "zero-tail", linkerScript: "SECTIONS { .xbss (NOLOAD) : { *(.xbss) } } INSERT AFTER .eh_frame;\n",
            flags: ["-Wl,-z,noseparate-code", "-lpthread"])
        defer { try? FileManager.default.removeItem(atPath: preload.directory) }
        // The segment is as described: executable, with bytes past the file's.
        let headers = try run("/usr/bin/readelf", ["-lW", preload.library]).stdout
        let code = try #require(headers.split(separator: "\n").first { $0.contains("LOAD") && $0.contains("R E") },
                                "\(headers)")
        let fields = code.split(separator: " ")
        #expect(fields.count > 5 && UInt64(fields[4].dropFirst(2), radix: 16)! < UInt64(fields[5].dropFirst(2), radix: 16)!,
                "\(code)")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, environment: ["LD_PRELOAD": preload.library])
        defer { daemon.stop() }
        _ = try daemon.waitForLog(Self.released)
        _ = FileManager.default.createFile(atPath: directory + "/check", contents: nil)
        let found = try daemon.waitForLog("zero-tail:")
        #expect(found.hasSuffix("zero-tail: 0 bytes that should be zero are not"), "\(found)")
    }

    /// Builds `source` into a shared library to preload into the daemon.
    static func compilePreload(_ source: String, name: String, linkerScript: String? = nil,
                               flags: [String] = []) throws -> (directory: String, library: String) {
        let directory = try makeTemporaryDirectory(name)
        try source.write(toFile: directory + "/\(name).c", atomically: true, encoding: .utf8)
        var arguments = ["-shared", "-fPIC", "-O2", "-o", directory + "/lib\(name).so", directory + "/\(name).c"]
        if let linkerScript {
            try linkerScript.write(toFile: directory + "/\(name).ld", atomically: true, encoding: .utf8)
            arguments.append("-Wl,-T," + directory + "/\(name).ld")
        }
        let cc = try run("/usr/bin/cc", arguments + flags)
        guard cc.status == 0 else { throw HarnessError(description: "cc: \(cc.stderr)") }
        return (directory, directory + "/lib\(name).so")
    }
}
