// permissionsctl: the command-line client of org.example.Permissions.
import CLISupport
import DBusKit
import Glibc
import PermissionsModel

let usage = """
    Usage: permissionsctl [--system | --session | --address ADDRESS] COMMAND [ARGS]

    Query and change the permissions service (org.example.Permissions).

    Commands:
      status [PERMISSION]        your own status: every permission, or one in detail
      get APP PERMISSION         the status of any app (admin)
      list [APP]                 stored decisions, of every app or one (admin)
      grant APP PERMISSION       store "authorized" for an app (admin)
      deny APP PERMISSION        store "denied" for an app (admin)
      reset APP [PERMISSION...]  forget an app's decisions, all or some (admin)
      request [--reason TEXT] PERMISSION...
                                 ask for permissions (may prompt; waits for the answer)
      monitor                    print every StatusChanged and property change
      agent                      answer prompts in this terminal
      plugins                    the loaded plugins and their permissions

    Options:
      --system                   the system bus (the default)
      --session                  the session bus
      --address ADDRESS          the bus at ADDRESS
      --version                  show the package and interface versions
      -h, --help                 show this help

    Exit status: 0 on success, 1 when the service answers with an error, 2 for
    wrong usage.

    """

let specs = [OptionSpec("system"), OptionSpec("session"), OptionSpec("help"), OptionSpec("version"),
             OptionSpec("address", takesValue: true)]

func fail(_ message: String, code: Int32 = 1) -> Never {
    printError("permissionsctl: \(message)")
    exit(code)
}

func output(_ line: String) {
    print(line)
    fflush(nil)
}

let parsed: ParsedOptions
do {
    parsed = try parseOptions(Array(CommandLine.arguments.dropFirst()), specs: specs, stopAtFirstPositional: true)
} catch {
    fail("\(error)\nTry 'permissionsctl --help'.", code: 2)
}
if parsed.has("help") {
    print(usage, terminator: "")
    exit(0)
}
if parsed.has("version") {
    print(Versions.line(program: "permissionsctl"))
    exit(0)
}
guard let command = parsed.positional.first else { fail("no command given\nTry 'permissionsctl --help'.", code: 2) }
let arguments = Array(parsed.positional.dropFirst())

var bus = Bus.system
if parsed.has("session") { bus = .session }
if let address = parsed.last("address") { bus = .address(address) }

let client: Client
do {
    client = try Client(bus: bus)
} catch {
    fail("cannot connect to the bus: \(error.message)")
}

func expectArguments(_ range: ClosedRange<Int>, _ synopsis: String) {
    guard range.contains(arguments.count) else { fail("usage: permissionsctl \(command) \(synopsis)", code: 2) }
}

do {
    switch command {
    case "status":
        expectArguments(0...1, "[PERMISSION]")
        if let permission = arguments.first {
            let details = try client.call("GetDetails", .string(permission)).first?.stringKeyedEntries ?? []
            for (key, value) in details { output(Format.detail(key, value)) }
        } else {
            let all = try client.call("GetAll").first?.stringKeyedEntries ?? []
            output(Format.table(["PERMISSION", "STATUS"], all.map { [$0.0, $0.1.stringValue ?? ""] }))
        }
    case "get":
        expectArguments(2...2, "APP PERMISSION")
        output(try client.call("GetStatusForApp", .string(arguments[0]), .string(arguments[1])).first?.stringValue ?? "")
    case "list":
        expectArguments(0...1, "[APP]")
        let rows = try client.call("ListDecisions", .string(arguments.first ?? "")).first?.arrayElements ?? []
        output(Format.table(["APP", "PERMISSION", "DECISION", "SET AT", "SET BY"], rows.map(Format.decisionRow)))
    case "grant", "deny":
        expectArguments(2...2, "APP PERMISSION")
        let decision = command == "grant" ? "authorized" : "denied"
        _ = try client.call("SetDecision", .string(arguments[0]), .string(arguments[1]), .string(decision))
    case "reset":
        expectArguments(1...64, "APP [PERMISSION...]")
        let removed = try client.call("ResetDecisions", .string(arguments[0]), .strings(Array(arguments.dropFirst())))
        output("removed \(removed.first?.uint32Value ?? 0) decision(s)")
    case "plugins":
        expectArguments(0...0, "")
        let plugins = try client.property("Plugins").arrayElements ?? []
        output(Format.table(["PLUGIN", "VERSION", "STATE", "PERMISSIONS"], plugins.map(Format.pluginRow)))
    case "monitor":
        expectArguments(0...0, "")
        try client.monitor { output($0) }
    case "request":
        var names = arguments
        var reason = ""
        if names.first == "--reason" {
            guard names.count >= 2 else { fail("usage: permissionsctl request [--reason TEXT] PERMISSION...", code: 2) }
            reason = names[1]
            names.removeFirst(2)
        }
        guard !names.isEmpty else { fail("usage: permissionsctl request [--reason TEXT] PERMISSION...", code: 2) }
        let options = DBusValue.vardict(reason.isEmpty ? [] : [("reason", .string(reason))])
        if names.count == 1 {
            output(try client.call("Request", .string(names[0]), options, timeout: Client.noTimeout).first?.stringValue ?? "")
        } else {
            let result = try client.call("RequestMany", .strings(names), options, timeout: Client.noTimeout)
            let statuses = result.first?.stringKeyedEntries ?? []
            output(Format.table(["PERMISSION", "STATUS"], statuses.map { [$0.0, $0.1.stringValue ?? ""] }))
        }
    case "agent":
        expectArguments(0...0, "")
        client.connection.close()
        do {
            try TerminalAgent(bus: bus, print: output).run()
        } catch {
            fail("cannot connect to the bus: \(error.message)")
        }
    default:
        fail("unknown command \"\(command)\"\nTry 'permissionsctl --help'.", code: 2)
    }
} catch {
    fail("\(error.message) (\(error.name))")
}
