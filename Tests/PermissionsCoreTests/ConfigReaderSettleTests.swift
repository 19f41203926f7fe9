import Foundation
internal import SystemPrimitives
import Testing
@testable import PermissionsModel
@testable import PermissionsConfig
@testable import PermissionsDaemon

/// A settle clock moved by hand: a timer set on it runs only when the test moves
/// the clock past its deadline.
///
/// `@unchecked Sendable`: `now` and `timers` are touched on the reader's queue only
/// (the test moves the clock there, through `queue.sync`).
private final class ManualClock: SettleClock, @unchecked Sendable {
    var now = Deadline(uptimeNanoseconds: 1_000_000_000)
    private var timers: [(deadline: Deadline, queue: Queue, body: @Sendable () -> Void)] = []
    /// Signalled when a timer is set.
    let timerSet = Semaphore(value: 0)

    func run(at deadline: Deadline, on queue: Queue, _ body: @escaping @Sendable () -> Void) {
        timers.append((deadline, queue, body))
        timerSet.signal()
    }

    /// Moves the clock on by `milliseconds`, and runs the timers now due.
    func advance(milliseconds: Int) {
        now = now + .milliseconds(milliseconds)
        let due = timers.filter { $0.deadline <= now }
        timers.removeAll { $0.deadline <= now }
        for timer in due { timer.queue.async(execute: timer.body) }
    }
}

/// The readings the serving queue got. `@unchecked Sendable`: guarded by `lock`.
private final class Delivered: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [ConfigReading] = []
    let arrived = Semaphore(value: 0)

    func add(_ reading: ConfigReading) {
        lock.withLock { list.append(reading) }
        arrived.signal()
    }

    var readings: [ConfigReading] { lock.withLock { list } }
}

/// ConfigReader's settle window, on real files and inotify, with the clock in the
/// test's hands: no sleep, no bus.
@Suite("ConfigReader: the settle window")
struct ConfigReaderSettleTests {
    let dir: TempDirectory
    let aside: TempDirectory
    let serving = Queue(label: "config-reader-test.serving")
    private let clock = ManualClock()
    private let delivered = Delivered()
    let reader: ConfigReader

    init() throws {
        dir = try TempDirectory()
        aside = try TempDirectory()
        try dir.write("permissions.conf", "[camera]\nenabled=true\n")
        try dir.write("permissions.conf.d/50-spy.conf", "[camera]\ndeny=org.example.Spy\n")
        reader = ConfigReader(files: ConfigFiles(directory: dir.path), serving: serving, clock: clock)
        reader.deliver = { [delivered] in delivered.add($0) }
    }

    var dropIn: String { dir.url("permissions.conf.d/50-spy.conf") }

    static func denies(_ reading: ConfigReading) -> Bool {
        ((try? reading.entries.get()) ?? []).contains { $0.key == "deny" && $0.value == "org.example.Spy" }
    }

    /// An editor's save: the file renamed away, and the reader waiting for it.
    func renameAway() {
        #expect(rename(dropIn, aside.url("50-spy.conf")) == 0)
        #expect(clock.timerSet.wait(timeout: .now() + 5) == .success, "the reader set no settle timer")
        serving.sync {}
        #expect(delivered.readings.isEmpty, "applied while the file was gone for less than the window")
    }

    @Test func aFileBackWithinTheWindowIsWaitedFor() throws {
        #expect(Self.denies(reader.start()))
        renameAway()
        reader.queue.sync { clock.advance(milliseconds: 300) }
        serving.sync {}
        #expect(delivered.readings.isEmpty, "applied before the window ended")

        #expect(rename(aside.url("50-spy.conf"), dropIn) == 0)
        #expect(delivered.arrived.wait(timeout: .now() + 5) == .success, "the file came back and nothing was read")
        #expect(delivered.readings.count == 1)
        #expect(delivered.readings.allSatisfy(Self.denies), "the reading applied went without the file")
    }

    @Test func aFileGoneForTheWholeWindowIsReallyGone() throws {
        #expect(Self.denies(reader.start()))
        renameAway()
        reader.queue.sync { clock.advance(milliseconds: 500) }
        #expect(delivered.arrived.wait(timeout: .now() + 5) == .success, "nothing read once the window ended")
        #expect(delivered.readings.count == 1)
        #expect(!delivered.readings.contains(where: Self.denies))
    }

    /// Start-up's reading is made early, while the plugins start (`readEarly`); an
    /// editor's save after it is in the reading start-up puts in force, not only in
    /// the one the watcher brings after the name is owned (a breaker helper saw a
    /// restriction saved during the plugins' start come 4 ms after the name).
    @Test func aSaveAfterTheEarlyReadingIsInStartUpsReading() throws {
        let made = Semaphore(value: 0)
        reader.readEarly { made.signal() }
        #expect(made.wait(timeout: .now() + 5) == .success, "no early reading")
        try aside.write("permissions.conf", "[camera]\nenabled=false\n")
        #expect(rename(aside.url("permissions.conf"), dir.url("permissions.conf")) == 0)
        let reading = reader.start()
        let entries = try reading.entries.get()
        #expect(entries.contains { $0.section == "camera" && $0.key == "enabled" && $0.value == "false" },
                "\(entries)")
        #expect(!entries.contains { $0.section == "camera" && $0.key == "enabled" && $0.value == "true" })
    }

    /// Nothing changed since the early reading: start-up takes it as it is.
    @Test func theEarlyReadingIsStartUpsWhenNothingChanged() throws {
        let made = Semaphore(value: 0)
        reader.readEarly { made.signal() }
        #expect(made.wait(timeout: .now() + 5) == .success, "no early reading")
        let reading = reader.start()
        #expect(reading.number == 1)
        #expect(Self.denies(reading))
    }
}
