// The options of the benches that measure another user's calls in windows
// (config-edits, request-handles): rounds of windows of one length, --keep and
// --smoke, read by one loop that leaves each bench its own options.
import Foundation

/// The options config-edits and request-handles share.
struct WindowOptions {
    var window: Double
    var rounds: Int
    var keep = false
    /// --smoke: the smallest run, to show the bench works (CI), not to measure.
    var smoke = false

    /// Reads `arguments` (`window` and `rounds` are the bench's defaults): --window S,
    /// --rounds N and --keep here, and the windows of --quick (one round of 1 s) and
    /// --smoke (one round of 0.3 s), which then go to `own` too, for the bench's own
    /// sizes; -h/--help prints `usage` and exits. Every other option goes to `own`
    /// with a function that takes its value as a positive number, and `own` returns
    /// false for one it does not know (a usage error, as is a value that is not a
    /// positive number).
    init(_ arguments: [String], usage: String, window: Double = 4, rounds: Int = 3,
         _ own: (_ option: String, _ number: () -> Double) -> Bool) {
        (self.window, self.rounds) = (window, rounds)
        var rest = arguments[...]
        func number(_ option: String) -> Double {
            guard let v = rest.popFirst(), let n = Double(v), n > 0 else {
                usageError("\(option) needs a positive number", usage: usage)
            }
            return n
        }
        while let option = rest.popFirst() {
            switch option {
            case "--window": self.window = number(option)
            case "--rounds": self.rounds = max(1, Int(number(option)))
            case "--keep": keep = true
            case "--quick":
                (self.window, self.rounds) = (1, 1)
                _ = own(option, { number(option) })
            case "--smoke":
                (smoke, self.window, self.rounds) = (true, 0.3, 1)
                _ = own(option, { number(option) })
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                guard own(option, { number(option) }) else { usageError("unknown option \(option)", usage: usage) }
            }
        }
    }
}

/// A usage error: the message and the usage, exit status 2.
func usageError(_ message: String, usage: String) -> Never {
    fail("\(message)\n\(usage)", code: 2)
}
