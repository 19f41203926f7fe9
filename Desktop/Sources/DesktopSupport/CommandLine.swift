internal import Glibc
internal import PermissionsModel

/// The command line both desktop programs share: `-h`/`--help` prints `usage`,
/// `--version` the versions, and the bus options (`BusChoice`) choose the
/// service's bus; any other argument is wrong usage unless `allowed` holds it.
/// Exits for help, version and wrong usage (status 2), as permissionsctl does.
public func parseCommandLine(program: String, usage: String, allowed: Set<String> = []) -> BusChoice {
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.contains("--help") || arguments.contains("-h") {
        print(usage, terminator: "")
        exit(0)
    }
    if arguments.contains("--version") {
        print(Versions.line(program: program))
        exit(0)
    }
    let choice: BusChoice
    do throws(BusChoice.Problem) {
        choice = try BusChoice.parse(arguments)
    } catch {
        switch error {
        case .usage(let message): printError(program, "\(message)\n\(usage)")
        case .environment(let message): printError(program, message)
        }
        exit(2)
    }
    if let extra = choice.rest.first(where: { !allowed.contains($0) }) {
        printError(program, "unexpected argument \(extra)\n\(usage)")
        exit(2)
    }
    return choice
}
