import Foundation
import Testing
import PermissionsTestSupport
@testable import PermissionsModel
@testable import PermissionsStore
@testable import PermissionsService

/// The serial epoch and the change serials built on it: a defined range, checked
/// steps, a start refused (never a trap, never a wrap) when the stored epoch has no
/// next one or the new one cannot be stored, and serials that strictly increase
/// across restarts whatever the stored epoch and the clock do.
@Suite struct SerialEpochTests {
    let dir: TempDirectory
    var path: String { dir.url("decisions.sqlite") }

    init() throws { dir = try TempDirectory() }

    private func sqlite(_ sql: String) throws -> String { try sqlite3(path, sql) }

    /// A store file holding `epoch` as its serial epoch, written with sqlite3 (as an
    /// edit, or another program, would).
    private func storeFile(epoch: Int64) throws {
        try? FileManager.default.removeItem(atPath: path)
        _ = try DecisionStore(path: path)  // today's schema, then closed
        _ = try sqlite("INSERT OR REPLACE INTO meta (key, value) VALUES ('serial-epoch', \(epoch))")
    }

    private static let top = Int64(UInt32.max)

    @Test("the next epoch", arguments: [
        (0, 0, 1), (5, 10, 10), (10, 5, 11), (41, 41, 42),
        // A clock outside the range (before 1970, after 2106) is not taken.
        (5, -1, 6), (5, Int64.max, 6), (5, top, 6), (5, top - 1, top - 1),
        // The last epoch that still has a next one.
        (top - 1, 0, top),
    ] as [(Int64, Int64, Int64)])
    func nextEpoch(stored: Int64, clock: Int64, next: Int64) {
        #expect(SerialEpoch.next(after: stored, clockSeconds: clock).map(Int64.init) == next)
    }

    @Test("a stored epoch with no next one", arguments: [top, top + 1, Int64.max, -1, Int64.min])
    func noNextEpoch(stored: Int64) {
        #expect(SerialEpoch.next(after: stored, clockSeconds: 1_800_000_000) == nil)
    }

    @Test func firstSerialKeepsEveryBitOfTheEpoch() {
        #expect(SerialEpoch.firstSerial(UInt32.max) == 0xFFFF_FFFF_0000_0000)
        #expect(SerialEpoch.firstSerial(1) == 1 << 32)
    }

    /// The hostile tester's values: the open refuses, naming the value and the
    /// way out, and leaves the file as it is; the recovery it names works.
    @Test("an out-of-range stored epoch refuses the open", arguments: [Int64.max, top, -1])
    func outOfRangeEpochRefusesTheOpen(epoch: Int64) throws {
        try storeFile(epoch: epoch)
        let error = #expect(throws: SerialEpochError.self) { try DecisionStore(path: path) }
        #expect(error == .outOfRange(epoch, path: path))
        let text = error.map { "\($0)" } ?? ""
        #expect(text.hasPrefix("serial epoch out of range: \(path) holds the serial epoch \(epoch) "), "\(text)")
        #expect(text.contains("expected 0 to 4294967294"), "\(text)")
        let recovery = "DELETE FROM meta WHERE key = 'serial-epoch'"
        #expect(text.contains("sqlite3 \(path) \"\(recovery)\""), "\(text)")
        #expect(try sqlite("SELECT value FROM meta WHERE key = 'serial-epoch'") == "\(epoch)\n")
        #expect(try dir.contents().allSatisfy { !$0.contains("corrupt") })

        _ = try sqlite(recovery)
        let store = try DecisionStore(path: path)
        #expect(try store.nextEpoch(clockSeconds: 1_800_000_000) == 1_800_000_000)
    }

    /// 4294967294 is the last epoch a start can move on from: it gives 4294967295,
    /// whose serials keep their high bits, and the start after it is refused.
    @Test func theLastEpochIsUsedAndThenRefused() throws {
        try storeFile(epoch: Self.top - 1)
        do {
            let store = try DecisionStore(path: path)
            let epoch = try store.nextEpoch(clockSeconds: 1_800_000_000)
            #expect(epoch == UInt32.max)
            #expect(ChangeSerials(epoch: epoch).last(.broadcast) == 0xFFFF_FFFF_0000_0000)
            #expect(throws: SerialEpochError.outOfRange(Self.top, path: path)) {
                try store.nextEpoch(clockSeconds: 1_800_000_000)
            }
        }
        #expect(throws: SerialEpochError.outOfRange(Self.top, path: path)) { try DecisionStore(path: path) }
    }

    /// A new epoch that SQLite will not store is an error naming it, and the epoch
    /// does not move: nothing falls back to the wall clock.
    @Test func anEpochThatCannotBeStoredIsAnError() throws {
        try storeFile(epoch: 7)
        let store = try DecisionStore(path: path)
        try store.executeForTesting("PRAGMA query_only=ON")
        let error = #expect(throws: SerialEpochError.self) { try store.nextEpoch(clockSeconds: 1_800_000_000) }
        guard case .notStored(1_800_000_000, path, let why)? = error else {
            Issue.record("expected notStored(1800000000), got \(String(describing: error))")
            return
        }
        #expect(why.contains("readonly"), "\(why)")
        #expect("\(error!)".hasPrefix("serial epoch not stored: "))
        try store.executeForTesting("PRAGMA query_only=OFF")
        #expect(try store.nextEpoch(clockSeconds: 0) == 8)
    }

    @Test func aSequenceAtItsLastCountMovesEverySequenceToTheNewEpoch() throws {
        let stream = ChangeSerials.Sequence.stream(.user(1000))
        var serials = ChangeSerials(epoch: 5, counts: [.broadcast: UInt32.max - 1, stream: 3])
        var asked = 0
        let newEpoch = { () -> UInt32 in asked += 1; return 9 }
        #expect(serials.next(.broadcast, newEpoch: newEpoch) == 5 << 32 | 0xFFFF_FFFF)
        #expect(asked == 0)
        #expect(serials.next(.broadcast, newEpoch: newEpoch) == 9 << 32 | 1)
        #expect(asked == 1)
        // Every sequence jumped: the stream's next serial is in the new epoch too.
        #expect(serials.last(stream) == 9 << 32)
        #expect(serials.next(stream, newEpoch: newEpoch) == 9 << 32 | 1)

        // No new epoch: nothing is counted, and the error comes out.
        struct NoEpoch: Error {}
        var full = ChangeSerials(epoch: 5, counts: [stream: UInt32.max])
        #expect(throws: NoEpoch.self) { try full.next(stream) { throw NoEpoch() } }
        #expect(full.last(stream) == 5 << 32 | 0xFFFF_FFFF)
        #expect(full.epoch == 5)
    }

    /// The property: over random stored epochs (in range, at its edges, beyond it)
    /// and a clock that jumps back and forth (to before 1970, past 2106), each
    /// restart of a real store either refuses with the named error, leaving the
    /// file's epoch as it was, or serves serials all above every serial told
    /// before; sequences near their last count included.
    @Test func serialsStrictlyIncreaseAcrossRestarts() throws {
        // A new seed each run, printed with every failure; PERMISSIONS_TEST_SEED repeats one.
        let seed = ProcessInfo.processInfo.environment["PERMISSIONS_TEST_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        let starts: [Int64] = [0, 1, 1_700_000_000, Self.top - 3, Self.top - 1, Self.top, Int64.max, -5]
        for run in 0..<24 {
            let initial = run < starts.count ? starts[run] : Int64.random(in: 0...Self.top + 2, using: &random)
            try storeFile(epoch: initial)
            var clock = Int64.random(in: 1_600_000_000...1_900_000_000, using: &random)
            // Above every serial the epochs before could tell (each sequence counts on its own).
            var floor: UInt64? = nil
            var refused = false
            for restart in 0..<8 {
                let context = "seed \(seed), run \(run) (epoch \(initial)), restart \(restart), clock \(clock)"
                let stored = try sqlite("SELECT value FROM meta WHERE key = 'serial-epoch'")
                do {
                    let store = try DecisionStore(path: path)
                    let epoch = try store.nextEpoch(clockSeconds: clock)
                    #expect(!refused, "\(context): a start after a refusal served")
                    // Some changes in two sequences, one of them started near its last count now and then.
                    let stream = ChangeSerials.Sequence.stream(.user(UInt32(restart)))
                    var serials = ChangeSerials(epoch: epoch, counts: random.next() % 3 == 0 ? [stream: UInt32.max - 1] : [:])
                    var last: [ChangeSerials.Sequence: UInt64] = [:]
                    for sequence in [ChangeSerials.Sequence.broadcast, stream] {
                        let subscribed = serials.last(sequence)
                        if let floor { #expect(subscribed > floor, "\(context): \(subscribed) after \(floor)") }
                        last[sequence] = subscribed
                    }
                    for _ in 0..<Int(random.next() % 5) {
                        let sequence = random.next() % 2 == 0 ? ChangeSerials.Sequence.broadcast : stream
                        let serial = try serials.next(sequence) { try store.nextEpoch(clockSeconds: clock) }
                        #expect(serial > last[sequence]!, "\(context): \(serial) after \(last[sequence]!)")
                        if let floor { #expect(serial > floor, "\(context): \(serial) after \(floor)") }
                        last[sequence] = serial
                    }
                    floor = SerialEpoch.firstSerial(serials.epoch) | 0xFFFF_FFFF
                } catch let error as SerialEpochError {
                    guard case .outOfRange(let value, _) = error else {
                        Issue.record("\(context): \(error)")
                        return
                    }
                    #expect(!SerialEpoch.movable.contains(value), "\(context)")
                    #expect("\(error)".contains("\(value)"), "\(context)")
                    // Untouched by the refusal: the file holds the epoch refused, which is the
                    // one found at the restart or one this run moved to before it ran out.
                    #expect(try sqlite("SELECT value FROM meta WHERE key = 'serial-epoch'")
                                .trimmingCharacters(in: .whitespacesAndNewlines) == "\(value)", "\(context), was \(stored)")
                    refused = true
                }
                // The clock jumps: back by up to ten years, forward by up to one, or far out.
                switch random.next() % 6 {
                case 0: clock = clock.subtractingReportingOverflow(Int64(random.next() % 315_360_000)).partialValue
                case 1: clock = Int64.random(in: -1_000...Self.top + 1_000, using: &random)
                case 2: clock = [Int64.min, -1, 0, Self.top, Int64.max][Int(random.next() % 5)]
                default: clock = clock.addingReportingOverflow(Int64(random.next() % 31_536_000)).partialValue
                }
            }
        }
    }
}
