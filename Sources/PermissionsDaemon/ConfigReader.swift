import PermissionsModel
import PermissionsSupport
import PermissionsConfig
internal import SystemPrimitives

/// One reading of the configuration files, as the serving queue gets it: whole,
/// parsed, made while no file changed (or, under a stream of edits renamed into
/// place, as the last reading found them).
struct ConfigReading: Sendable {
    /// The merged entries, or the first problem (file and line).
    let entries: Result<[ConfigEntry], ConfigFiles.ParseError>
    /// What the entries say, for a comparison with what is in force.
    let settings: ConfigFiles.Settings
    /// Its number, counted from start-up's reading (1), for the log.
    let number: Int

    init(_ reading: ConfigFiles.Reading, number: Int) {
        self.init(entries: reading.entries, number: number)
    }

    init(entries: Result<[ConfigEntry], ConfigFiles.ParseError>, number: Int) {
        self.entries = entries
        settings = ConfigFiles.Settings((try? entries.get()) ?? [])
        self.number = number
    }
}

/// Reads the configuration files on a queue of its own, so that the serving queue
/// answers everyone while they are listed, read and parsed (5 000 drop-ins take
/// 50 to 200 ms on two cores), and watches them there (ConfigWatcher: working out
/// what to watch after an event costs a look at each drop-in). The serving queue
/// gets each reading whole (`deliver`), and switches to it (ConfigApplier).
///
/// - A reading during which a file changed is not trusted (a file may have been
///   read half-written): the change has scheduled one more reading. However many
///   edits come during one reading, they make one more. Edits that keep coming
///   faster than a reading do not keep the configuration out for ever: once every
///   reading has seen a change for a whole `settleWindow`, the last one is used,
///   unless a file was written in place (not renamed into place) during it.
/// - A file of the configuration that is gone (an editor's save renames the old file
///   away before it writes the new one), or created and still open for writing,
///   puts the reading off until it is back (or closed), or until it has been gone
///   for a whole `settleWindow`: then it is really gone. Each file has its own
///   window (one gone later waits its full window too). The window's clock and
///   timer are a `SettleClock`, which unit tests move by hand.
///
/// Debug builds, for tests: with PERMISSIONS_DEBUG_CONFIG_GATE naming a Unix socket,
/// each reading after start-up's waits there first (TestGate), as a slow disk would
/// make it wait.
///
/// `@unchecked Sendable`: everything is touched only on `queue`, except `deliver`,
/// only on the serving queue.
final class ConfigReader: @unchecked Sendable {
    static let settleWindow = Deadline.Interval.milliseconds(500)

    let files: ConfigFiles
    /// Background QoS (libdispatch runs its threads at nice 10 on Linux): a reading
    /// gives way to the serving queue, the bus and the callers when they want the
    /// CPU, and takes the longer for it on a busy machine. (On two cores with an
    /// edit every 200 ms, at utility's nice 2 a caller's p99 went past twice its
    /// idle figure in one run of two; at nice 10 it stayed below it.)
    let queue = Queue(label: "org.example.Permissions.config", priority: .background)
    private let serving: Queue
    private let clock: any SettleClock
    /// Where each reading after start-up's goes, on the serving queue.
    var deliver: (ConfigReading) -> Void = { _ in }
    private var watcher: ConfigWatcher?
    /// The files of the configuration last read: one of them gone means wait.
    private var knownFiles: Set<String> = []
    /// Since when each file of the configuration has been gone or unfinished.
    private var missingSince: [String: Deadline] = [:]
    /// Counts scheduled wake-ups, so that one superseded does nothing when it comes.
    private var wakeUps = 0
    private var readScheduled = false
    /// Since when every reading has seen the files change under it.
    private var changingSince: Deadline?
    private var readings = 0
    #if DEBUG
    private let gate = TestGate(environment: "PERMISSIONS_DEBUG_CONFIG_GATE")
    #endif

    init(files: ConfigFiles, serving: Queue, clock: any SettleClock = DispatchClock()) {
        self.files = files
        self.serving = serving
        self.clock = clock
    }

    /// Watches the files, then reads them, and returns that reading (or the one
    /// `readEarly` made already). Watched from before the reading, so that an edit
    /// made meanwhile is read again after it, and delivered as the next reading.
    /// Called once, at start-up, on the serving queue, which waits: nobody is served
    /// before the first configuration is in force, and `sync` runs the block on the
    /// calling thread, so start-up does not wait for a background one.
    func start() -> ConfigReading {
        queue.sync {
            guard let early else { return first() }
            self.early = nil
            // A file changed since the early reading (an editor's save while the
            // plugins started): read again, so that the configuration in force when
            // the name is owned is the files' as they are now, as it was when this
            // reading was made here. The change's own reading follows, and finds
            // nothing new.
            guard (watcher?.catchUp() ?? 0) == eventsBeforeFirst else { return again() }
            return early
        }
    }

    /// Makes start-up's reading now, for `start` to return: on a thread of its own
    /// at the default priority (this queue's is background, and a reading made on
    /// it while the cores are busy kept `start` waiting), through `sync`, which
    /// runs it on that thread. Start-up calls it once the service is made, while
    /// the plugins' inits run, which leave the cores idle between their hops
    /// (doc/performance.md, "Start-up's own work, counted"). If `start` comes
    /// first, it reads itself, and this does nothing.
    /// `then`, for tests: runs on that thread once the reading is made (or was not
    /// needed).
    func readEarly(then: (@Sendable () -> Void)? = nil) {
        Queue.runOnItsOwn(label: "org.example.Permissions.config-first-reading") { [self] in
            queue.sync {
                if watcher == nil { early = first() }
            }
            then?()
        }
    }

    /// The watcher's count of events when start-up's first reading began: one
    /// more by `start` means a file changed since (`start`).
    private var eventsBeforeFirst: UInt64 = 0

    /// Start-up's reading, when `readEarly` made it before `start` asked.
    private var early: ConfigReading?

    /// The watch, then the first reading (see `start`).
    private func first() -> ConfigReading {
        watcher = ConfigWatcher(files: files, queue: queue) { [weak self] in self?.changed() }
        eventsBeforeFirst = watcher?.catchUp() ?? 0
        return again()
    }

    /// A reading for start-up, the watch set.
    private func again() -> ConfigReading {
        let reading = read()
        knownFiles = Set(reading.files)
        return ConfigReading(reading, number: readings)
    }

    /// The watcher saw a change: reads again, once for a burst of events.
    private func changed() {
        guard !readScheduled else { return }
        readScheduled = true
        queue.async { [self] in
            readScheduled = false
            reload()
        }
    }

    private func read() -> ConfigFiles.Reading {
        readings += 1
        let started = clock.now
        let reading = files.read()
        logDebug("reading \(readings) of the configuration: \(reading.files.count) files in "
                 + "\((clock.now.uptimeNanoseconds - started.uptimeNanoseconds) / 1_000_000) ms")
        return reading
    }

    private func reload() {
        // What the files held while no event came: an event during the reading (a
        // file rewritten, or created but not yet written) has scheduled another.
        let events = watcher?.catchUp() ?? 0
        let writes = watcher?.writes ?? 0
        #if DEBUG
        if let gate {
            logDebug("reading \(readings + 1) of the configuration waits at the test gate")
            gate.wait()
        }
        #endif
        let reading = read()
        if (watcher?.catchUp() ?? 0) != events {
            // Not trusted, unless the files have kept changing during every reading
            // for a settle window, and only by renames: edits coming faster than a
            // reading must not keep them all out, and a file renamed into place is
            // read as it was before or after, whole. A file written in place may
            // have been read half-written: never used. The next reading (the edit
            // scheduled it) sees the rest.
            let now = clock.now
            let since = changingSince ?? now
            changingSince = since
            guard now >= since + Self.settleWindow, (watcher?.writes ?? 0) == writes else {
                return logDebug("the configuration changed during reading \(readings); reading it again")
            }
            logInfo("the configuration kept changing while it was read, for \(Self.settleWindowMilliseconds) ms; "
                    + "using reading \(readings) as it found the files, and reading them again")
        }
        changingSince = nil
        var present = Set(reading.files)
        if let unlisted = reading.unlisted {
            // Which of its files are there is not known: none counts as gone.
            present.formUnion(knownFiles.filter { Files.directoryName($0) == unlisted })
        }
        let gone = knownFiles.subtracting(present)
        let unfinished = watcher?.beingWritten ?? []
        // Each file waited for has its own window: applied as gone only when it has
        // been gone (or unfinished) for all of it, so the log line is true of each.
        let waiting = gone.union(unfinished)
        let now = clock.now
        missingSince = missingSince.filter { waiting.contains($0.key) }
        let newlyMissing = waiting.filter { missingSince[$0] == nil }
        for file in newlyMissing { missingSince[file] = now }
        if let latest = missingSince.values.max(), now < latest + Self.settleWindow {
            if !newlyMissing.isEmpty {
                logDebug(("\(newlyMissing.sorted().joined(separator: ", ")) gone or being written; waiting up to "
                          + "\(Self.settleWindowMilliseconds) ms for \(newlyMissing.count == 1 ? "it" : "them") to be back whole")
                         .escapedForLog)
            }
            return wakeUp(at: latest + Self.settleWindow)
        }
        if !gone.isEmpty {
            logInfo(("\(gone.sorted().joined(separator: ", ")) gone for \(Self.settleWindowMilliseconds) ms; "
                     + "applying the configuration without \(gone.count == 1 ? "it" : "them")").escapedForLog)
        }
        if !unfinished.isEmpty {
            logInfo(("\(unfinished.sorted().joined(separator: ", ")) still open for writing after "
                     + "\(Self.settleWindowMilliseconds) ms; reading \(unfinished.count == 1 ? "it" : "them") as it is")
                    .escapedForLog)
        }
        missingSince = [:]
        wakeUps += 1  // a pending wake-up has nothing left to do
        knownFiles = present
        let settled = ConfigReading(reading, number: readings)
        serving.async { [self] in deliver(settled) }
    }

    private static var settleWindowMilliseconds: Int {
        if case .milliseconds(let ms) = settleWindow { return ms }
        return 0
    }

    /// Reads again at `deadline`, unless a later reading has settled things first.
    private func wakeUp(at deadline: Deadline) {
        wakeUps += 1
        let wakeUp = wakeUps
        clock.run(at: deadline, on: queue) { [self] in
            guard wakeUps == wakeUp else { return }
            reload()
        }
    }
}
