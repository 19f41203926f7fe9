// Checks one key's history of concurrent operations against a serial model, with
// the StatusChanged signals the key got as the model's list of real changes.
//
// The question: is there one order of the operations, consistent with real time
// (an operation that returned before another was called comes first), in which
// every reply is what the serial model answers, and the status changes exactly
// where a signal says, to the status it says, with no change unsignalled and no
// signal without a change? Wing & Gong's search with Lowe's memoisation
// ("Testing for linearizability", 2017): depth first through the calls that may go
// next, remembering (operations done, state) pairs already tried.
//
// The state is an index into the signal list (0: before the first signal), so the
// model's value at each point is the signalled one, and "signals = real changes"
// is part of the search rather than a count compared afterwards.
//
// Two prunings keep the search near one step per operation on the model test's
// histories of ~3 000 operations a key, ~1 000 of them alike (Requests that all
// answer "denied"): without them it took up to 80 million steps and, on a slower
// CI machine, ran past its limit.
// - Alike operations go in call order. Of two operations with the same kind and
//   reply, where one was called no later and returned no later than the other, some
//   order that works (if any does) has it first: swapping two alike operations in
//   an order that works gives one that works, as each fits the other's place in time.
// - Nothing called after a signal arrived goes before the change it reports.

import PermissionsTestSupport

/// One operation as a client saw it.
struct ModelOperation {
    enum Kind: Hashable {
        case get
        case set(String)
        /// ResetDecisions for this key only: `removed` is 1 if a decision went.
        case reset
        /// ResetDecisions for every permission of the app: checked per key, without
        /// the count, which covers several keys.
        case resetApp
        /// Request from this process: prompts while not-determined.
        case request
    }

    enum Reply: Hashable {
        case status(String)
        case removed(UInt32)
        case done
    }

    let client: Int
    let key: String
    let kind: Kind
    let reply: Reply
    let invoked: UInt64
    let returned: UInt64
}

/// The serial model of one key: its value is a status word.
struct KeyModel {
    static let notDetermined = "not-determined"
    /// The status a prompt's answer gives this key (the scripted agent's answer).
    let answered: String?

    /// Whether `op` leaves every state as it is (and so only reads it): a get, a
    /// reset that removed nothing, a request answered otherwise than a prompt would.
    func isRead(_ op: ModelOperation) -> Bool {
        switch (op.kind, op.reply) {
        case (.get, _), (.reset, .removed(0)): return true
        case (.request, .status(let s)): return s != answered
        default: return false
        }
    }

    /// The value after `op` from `value`, or nil if the reply does not fit.
    func apply(_ op: ModelOperation, to value: String) -> String? {
        switch (op.kind, op.reply) {
        case (.get, .status(let s)):
            return s == value ? value : nil
        case (.set(let decision), .done):
            return decision
        case (.reset, .removed(let n)):
            return n == (value == Self.notDetermined ? 0 : 1) ? Self.notDetermined : nil
        case (.resetApp, .removed):
            return Self.notDetermined
        case (.request, .status(let s)):
            if value != Self.notDetermined { return s == value ? value : nil }
            guard let answered else { return nil }
            return s == answered ? answered : nil
        default:
            return nil
        }
    }
}

struct LinearizabilityChecker {
    let ops: [ModelOperation]
    /// states[0] is the value before any signal; states[i] the status of signal i.
    let states: [String]
    /// When the subscriber received signal i (index 0 unused).
    let signalTimes: [UInt64]
    let model: KeyModel

    enum Outcome: Equatable {
        case linearizable
        case notLinearizable
        /// The search ran past its step limit (a pathological history).
        case undecided
    }

    /// The next state index after `op` from `index`, or nil.
    private func step(_ op: ModelOperation, from index: Int) -> Int? {
        guard let value = model.apply(op, to: states[index]) else { return nil }
        if value == states[index] { return index }
        // A real change: it must be the next signal, sent after the call was made.
        guard index + 1 < states.count, states[index + 1] == value, op.invoked <= signalTimes[index + 1] else {
            return nil
        }
        return index + 1
    }

    /// A (operations done, state) pair, by a 128-bit Zobrist hash of the set: one
    /// XOR per step instead of hashing a bit set of every operation (a collision,
    /// about n² in 2¹²⁸, could only make the search give up a path early).
    private struct Memo: Hashable {
        var low: UInt64
        var high: UInt64
        var state: Int
    }

    func check(stepLimit: Int = 50_000_000) -> (outcome: Outcome, steps: Int) {
        let n = ops.count
        // Events: node 0 is the head; op i has a call node 1 + 2i and a return node 2 + 2i.
        var events: [(time: UInt64, isReturn: Bool, node: Int)] = []
        for (i, op) in ops.enumerated() {
            events.append((op.invoked, false, 1 + 2 * i))
            events.append((op.returned, true, 2 + 2 * i))
        }
        events.sort { a, b in a.time != b.time ? a.time < b.time : (!a.isReturn && b.isReturn) }
        var next = [Int](repeating: -1, count: 2 * n + 1)
        var prev = [Int](repeating: -1, count: 2 * n + 1)
        var last = 0
        for event in events {
            next[last] = event.node
            prev[event.node] = last
            last = event.node
        }

        func lift(_ call: Int) {
            for node in [call, call + 1] {
                next[prev[node]] = next[node]
                if next[node] >= 0 { prev[next[node]] = prev[node] }
            }
        }
        func unlift(_ call: Int) {
            for node in [call + 1, call] {
                if next[node] >= 0 { prev[next[node]] = node }
                next[prev[node]] = node
            }
        }

        var keys = SeededRandom(seed: 0x11EA_41AB)
        let zobrist = (0..<n).map { _ in (keys.next(), keys.next()) }
        var done = (low: UInt64(0), high: UInt64(0))
        func toggle(_ i: Int) {
            done.low ^= zobrist[i].0
            done.high ^= zobrist[i].1
        }
        var memo = Set<Memo>()
        let reads = ops.map { model.isRead($0) }
        let earlierAlike = Self.earlierAlike(ops)
        var placed = [Bool](repeating: false, count: n)

        /// The operations that may go next from `state`: those called before the first
        /// pending return and before the subscriber got the next signal, which fit the
        /// state. The change a signal reports was made before the signal was sent, so an
        /// operation called after it arrived comes after that change: without this bound
        /// a read called after the signal could still answer the old status, and the
        /// operations that overlap a long Request were tried at every state it spans
        /// (the search ran past its step limit in CI). A read that fits is the only choice:
        /// if any order of the rest works, one with the read first does (nothing it
        /// waits for is left, and it changes nothing). Otherwise earliest return
        /// first, the operation whose time runs out first: with that order the first
        /// path nearly always works (about one step per operation on the model test's
        /// histories, where call order took thousands).
        func choices() -> [(op: Int, after: Int)] {
            var result: [(op: Int, after: Int)] = []
            let horizon = state + 1 < states.count ? signalTimes[state + 1] : UInt64.max
            var node = next[0]
            // Call nodes are in the order of their calls, so the first past the horizon ends the list.
            while node >= 0, node % 2 == 1, ops[(node - 1) / 2].invoked <= horizon {
                let i = (node - 1) / 2
                if earlierAlike[i].contains(where: { !placed[$0] }) {
                    node = next[node]
                    continue
                }
                if let after = step(ops[i], from: state) {
                    if reads[i] { return [(i, after)] }
                    result.append((i, after))
                }
                node = next[node]
            }
            return result.sorted { ops[$0.op].returned < ops[$1.op].returned }
        }

        // Depth-first: each frame holds the choices at its level and the next to try.
        var frames: [(choices: [(op: Int, after: Int)], tried: Int, stateBefore: Int)] = []
        var state = 0
        var steps = 0
        frames.append((choices(), 0, state))
        while let top = frames.last {
            steps += 1
            if steps > stepLimit { return (.undecided, steps) }
            if next[0] < 0, state == states.count - 1 { return (.linearizable, steps) }
            if top.tried < top.choices.count {
                let (i, after) = top.choices[top.tried]
                frames[frames.count - 1].tried += 1
                toggle(i)
                guard memo.insert(Memo(low: done.low, high: done.high, state: after)).inserted else {
                    toggle(i)
                    continue
                }
                lift(1 + 2 * i)
                placed[i] = true
                state = after
                frames.append((choices(), 0, after))
                continue
            }
            // Every choice here failed: undo the placement that led here.
            frames.removeLast()
            guard let parent = frames.last else { break }
            let (i, _) = parent.choices[parent.tried - 1]
            toggle(i)
            unlift(1 + 2 * i)
            placed[i] = false
            state = parent.stateBefore
        }
        return (.notLinearizable, steps)
    }

    /// For each operation, the alike ones (same kind, same reply) that must go
    /// before it: called no later, returned no later, ties broken by index. Only
    /// those still running when it was called: one that returned earlier goes
    /// first by real time anyway.
    private static func earlierAlike(_ ops: [ModelOperation]) -> [[Int]] {
        struct Shape: Hashable {
            let kind: ModelOperation.Kind
            let reply: ModelOperation.Reply
        }
        var result = [[Int]](repeating: [], count: ops.count)
        for members in Dictionary(grouping: ops.indices, by: { Shape(kind: ops[$0].kind, reply: ops[$0].reply) }).values {
            let byCall = members.sorted { (ops[$0].invoked, ops[$0].returned, $0) < (ops[$1].invoked, ops[$1].returned, $1) }
            for (position, later) in byCall.enumerated() {
                for earlier in byCall[..<position]
                where ops[earlier].returned >= ops[later].invoked && ops[earlier].returned <= ops[later].returned {
                    result[later].append(earlier)
                }
            }
        }
        return result
    }
}
