public import Foundation

/// Lines a child process prints, collected by a thread of their own, or lines a
/// callback appends (what a D-Bus handler saw), for a test to wait on in order.
///
/// `@unchecked Sendable`: `lines`, `closed` and `consumed` are only touched under
/// `condition`'s lock.
public final class LineCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var lines: [String] = []
    private var closed = false
    private var consumed = 0

    /// Lines come from `append(_:)` only.
    public init() {}

    /// Reads `handle` to its end on a new thread.
    public init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    append(line)
                }
            }
            condition.lock()
            closed = true
            condition.broadcast()
            condition.unlock()
        }
    }

    public func append(_ line: String) {
        condition.lock()
        lines.append(line)
        condition.broadcast()
        condition.unlock()
    }

    public var all: [String] {
        condition.lock()
        defer { condition.unlock() }
        return lines
    }

    /// Waits until `predicate` holds for every line so far; returns them.
    @discardableResult
    public func wait(timeout: TimeInterval = 15, what: String, until predicate: ([String]) -> Bool) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(lines) {
            if closed || !condition.wait(until: deadline) {
                guard predicate(lines) else {
                    let why = closed ? " (output closed)" : ""
                    throw HarnessError(description: "\(what): not within \(timeout) s\(why); lines: \(lines.suffix(40))")
                }
                break
            }
        }
        return lines
    }

    /// Waits for a line matching `predicate` after those earlier calls returned;
    /// returns it.
    @discardableResult
    public func next(timeout: TimeInterval = 15, matching predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let index = lines[consumed...].firstIndex(where: predicate) {
                consumed = index + 1
                return lines[index]
            }
            if closed || !condition.wait(until: deadline) {
                throw HarnessError(description: "no matching line within \(timeout) s; saw: \(lines.suffix(40))")
            }
        }
    }
}
