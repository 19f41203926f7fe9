// permissionsd-connector: connects permissionsd to a user's own PipeWire socket,
// which the daemon's unit may not write to, and hands it the connection. Options
// and protocol are permissionsd-connector(8)'s (doc/man/); the protocol is written
// down in UserSockets/ConnectorProtocol.swift, the checks in UserSockets/UserSocket.swift.
import CLISupport
import Glibc
import PermissionsModel
import UserSockets

let usage = """
    Usage: permissionsd-connector [OPTIONS]

    Connect permissionsd (root) to user UID's own PipeWire socket,
    DIR/UID/pipewire-0, checked to be that user's, and pass the connection back.
    It listens on the socket systemd passes it (permissionsd-connector.socket).

      --listen PATH        listen on a socket of its own at PATH (mode 0600), for a
                           system without systemd
      --user-runtime-root DIR
                           where each user's runtime directory is, DIR/UID
                           (default /run/user)
      --verbose            log every connection handed over too
      --version            show the package and protocol versions
      -h, --help           show this help

    """

let specs = ["verbose", "help", "version"].map { OptionSpec($0) }
    + ["listen", "user-runtime-root"].map { OptionSpec($0, takesValue: true) }

var root = "/run/user"
var listenPath: String?
var verbose = false
do {
    let parsed = try parseOptions(Array(CommandLine.arguments.dropFirst()), specs: specs, stopAtFirstPositional: false)
    try answerHelpAndVersion(parsed, usage: usage) {
        "permissionsd-connector \(Versions.package)\nconnector protocol version \(ConnectorProtocol.version)"
    }
    if let given = parsed.last("user-runtime-root") {
        guard given.hasPrefix("/") else {
            throw UsageError(description: "--user-runtime-root must be an absolute path: \(given.quotedForUsage)")
        }
        root = given
    }
    listenPath = parsed.last("listen")
    if let listenPath, !listenPath.hasPrefix("/") {
        throw UsageError(description: "--listen must be an absolute path: \(listenPath.quotedForUsage)")
    }
    verbose = parsed.has("verbose")
} catch {
    printError("permissionsd-connector: \(error)\nTry 'permissionsd-connector --help'.")
    exit(2)
}

let log = ConnectorLog(verbose: verbose)
// A caller gone before its reply is EPIPE on that send (MSG_NOSIGNAL), never a signal.
signal(SIGPIPE, SIG_IGN)
// Stopped by SIGTERM or SIGINT, their default action, whatever mask or disposition
// its starter left it (a test runner blocks them): it keeps nothing to clean up.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
for stop in [SIGTERM, SIGINT] {
    sigaddset(&stopSignals, stop)
    signal(stop, SIG_DFL)
}
pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
let listening: Int32
switch listenPath.map({ ListeningSocket.make(at: $0) }) ?? ListeningSocket.fromSystemd() {
case .failure(let problem):
    log.log(.error, problem.description)
    exit(1)
case .success(let fd):
    listening = fd
}
log.log(.debug, "serving user sockets in \(root)/UID: \(ConnectorProtocol.allowedNames.sorted().joined(separator: ", "))")
ConnectorServer(listening: listening, root: root, log: log).run()
