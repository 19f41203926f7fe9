internal import SystemPrimitives

/// Writes the daemon's log lines on a queue of its own, so that a log reader that
/// is behind never holds the thread that logs. A write(2) to a full pipe (journald
/// stuck, a supervisor that stopped reading) or a send to a full `/dev/log` blocks
/// until the reader catches up; done on the serving queue, it held every caller of
/// every user, and one user could cause it by making the daemon log (an agent
/// registered and dropped by the thousand, one line each).
///
/// Lines wait here in the order they were logged, up to `capacity` bytes. Past
/// that, a line is dropped and counted, and the count is written as a line of its
/// own once the reader takes lines again: the log says that it lost lines, and how
/// many, rather than losing them silently or stopping the service.
final class LogWriter: Sendable {
    /// One line: its priority and message, which the sink formats as it writes.
    struct Line: Sendable {
        let priority: Log.Priority
        let message: String
        var size: Int { message.utf8.count }
    }

    /// What waits for the queue; guarded by `state`'s lock.
    private struct Pending {
        var lines: [Line] = []
        var bytes = 0
        var dropped = 0
        /// A drain is on the queue or running: lines added meanwhile are taken by it.
        var draining = false
    }

    /// The most bytes of lines that wait at once: far more than a burst of start-up
    /// lines or a stop's, about 2 000 ordinary lines; bounded, so that a reader that
    /// never reads costs at most this much memory.
    static let defaultCapacity = 256 * 1024

    let capacity: Int
    private let state = Locked(Pending())
    private let queue = Queue(label: "org.example.Permissions.log")
    /// Writes one line to the sink; may block for as long as the reader is behind.
    private let output: @Sendable (Line) -> Void

    init(capacity: Int = LogWriter.defaultCapacity, output: @escaping @Sendable (Line) -> Void) {
        self.capacity = capacity
        self.output = output
    }

    /// Queues `line`, or counts it as dropped when `capacity` bytes already wait.
    /// Never blocks on the reader.
    func enqueue(_ line: Line) {
        let startDrain = state.withLock { pending -> Bool in
            if pending.bytes + line.size <= capacity {
                pending.lines.append(line)
                pending.bytes += line.size
            } else {
                pending.dropped += 1
            }
            guard !pending.draining else { return false }
            pending.draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
    }

    /// Writes what waits, batch by batch, until nothing does.
    private func drain() {
        while true {
            let batch = state.withLock { pending -> (lines: [Line], dropped: Int)? in
                guard !pending.lines.isEmpty || pending.dropped > 0 else {
                    pending.draining = false
                    return nil
                }
                defer { pending = Pending(draining: true) }
                return (pending.lines, pending.dropped)
            }
            guard let batch else { return }
            for line in batch.lines { output(line) }
            // The dropped lines came after every line of this batch (they were
            // dropped because this batch filled the space), so the count goes here.
            if batch.dropped > 0 { output(Self.droppedNotice(batch.dropped)) }
        }
    }

    /// Waits until every line queued before this call has been written, or for
    /// `timeoutMilliseconds`, whichever comes first; false when the time ran out
    /// (the reader is still behind). For the last lines before the process exits.
    @discardableResult
    func flush(timeoutMilliseconds: Int) -> Bool {
        let written = Semaphore(value: 0)
        // The queue is serial and a drain runs until nothing waits, so this block
        // runs after the drain that takes every line queued before it.
        queue.async { written.signal() }
        return written.wait(timeout: .now() + .milliseconds(timeoutMilliseconds)) == .success
    }

    static func droppedNotice(_ count: Int) -> Line {
        Line(priority: .warning,
             message: "\(count) log line\(count == 1 ? " was" : "s were") dropped: the log's reader was behind")
    }
}
