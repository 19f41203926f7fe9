/// `--cycles N` (N > 0), the one option of the device benches that take nothing
/// else; any other argument is a usage error, reported through `fail`.
func cyclesOption(_ arguments: [String], default cycles: Int, usage: String,
                  fail: (String, Int32) -> Never) -> Int {
    var cycles = cycles
    var rest = arguments[...]
    while let option = rest.popFirst() {
        switch (option, rest.first) {
        case ("--cycles", let value?) where Int(value).map({ $0 > 0 }) == true:
            cycles = Int(value)!
            rest.removeFirst()
        default:
            fail(usage, 2)
        }
    }
    return cycles
}
