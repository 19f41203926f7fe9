// permissionsctl: the command-line client of org.example.Permissions.
import CLISupport
import DBusKit
import Glibc
import PermissionsClient
import PermissionsModel

let usage = """
    Usage: permissionsctl [--system | --session | --address ADDRESS] COMMAND [ARGS]
           permissionsctl help | --help | COMMAND --help

    Query and change the permissions service (org.example.Permissions).

    Commands:
      status [--json] [PERMISSION]
                                 your own status: every permission, or one in detail
      get [--user U] APP PERMISSION
                                 an app's status for you, or for user U
      list [--json] [--user U | --all] [APP]
                                 stored decisions: yours, user U's, or everyone's
                                 and the unassigned ones (--all), of every app or one
      grant [--user U] APP PERMISSION
                                 store "authorized" for an app, yours or user U's
      deny [--user U] APP PERMISSION
                                 store "denied" for an app, yours or user U's
      reset [--user U | --unassigned] APP [PERMISSION...]
                                 forget an app's decisions, all or some
      assign APP USER [PERMISSION...]
                                 give an app's unassigned decisions to USER (admin)
      request [--reason TEXT] [--parent-window HANDLE] PERMISSION...
                                 ask for permissions as an app would (may prompt;
                                 waits for the answer; Ctrl-C closes the request)
      monitor [--json] [--broadcast]
                                 print your StatusChanged stream and property
                                 changes, and the service leaving and returning;
                                 --broadcast: the everyone-level ones only
      agent                      answer prompts in this terminal
      plugins [--json]           the loaded plugins and their permissions
      remotes [--json]           the PipeWire connections apps hold through the
                                 service (OpenPipeWireRemote): yours; root: all
      doctor                     check the service: on the bus, version, plugins,
                                 configuration, store, who you are taken for, agent
      settings [APP [PERMISSION]]
                                 open the privacy settings (permissions-settings,
                                 on the session bus) on an app's page, or on the
                                 list of permissions
      help                       show this help

    --json: JSON instead of text (monitor: one object per line); see
    permissionsctl(1) for the fields.

    Users: U and USER are a user name or uid. Your own decisions need polkit's
    org.example.permissions.manage-own on the system bus; another user's, --all,
    --unassigned and assign need an admin (root, or polkit's
    org.example.permissions.manage). Unassigned decisions come from a store
    written before decisions had users: a deny holds for every user, a grant for
    nobody, until assigned or reset.

    Options:
      --system                   the system bus (the default)
      --session                  the session bus
      --address ADDRESS          the bus at ADDRESS
      --version                  show the package and interface versions
      -h, --help                 show this help

    Environment:
      PERMISSIONS_BUS            the bus when no option names one: system,
                                 session or an ADDRESS (scripts/dev-up sets
                                 session)

    Exit status: 0 on success, 1 when the service answers with an error (doctor:
    when it found a problem; request: when the prompt was dismissed or the
    request ended without an answer), 2 for wrong usage (a PERMISSIONS_BUS naming
    no bus too), 130 when Ctrl-C closed a request.

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
// One bus: two would be a guess at which one was meant.
if ["system", "session", "address"].filter(parsed.has).count > 1 {
    fail("choose one of --system, --session, --address\nTry 'permissionsctl --help'.", code: 2)
}
guard let command = parsed.positional.first else { fail("no command given\nTry 'permissionsctl --help'.", code: 2) }

let commands: Set = ["status", "get", "list", "grant", "deny", "reset", "assign", "request", "monitor", "agent",
                     "plugins", "remotes", "doctor", "settings", "help"]
guard commands.contains(command) else { fail("unknown command \"\(command)\"\nTry 'permissionsctl --help'.", code: 2) }
// Usage is answered before any connection, so it works without a bus. request's
// --reason takes any text ("-h" too), so only its first argument can ask.
let rest = parsed.positional.dropFirst()
if command == "help" || (command == "request" ? ["--help", "-h"].contains(rest.first ?? "")
                                              : rest.contains("--help") || rest.contains("-h")) {
    print(usage, terminator: "")
    exit(0)
}

/// The bus an option names, if one does.
let busOption: Bus? = if parsed.has("session") { .session }
                      else if let address = parsed.last("address") { .address(address) }
                      else if parsed.has("system") { .system }
                      else { nil }
/// The bus option, else PERMISSIONS_BUS, else the system bus: the library's
/// default, read the library's way (and refused the same way).
let bus: Bus
if let busOption {
    bus = busOption
} else {
    do throws(PermissionsClientError) {
        bus = try PermissionsClient.Bus.fromEnvironment().dbusKitBus
    } catch {
        fail(error.message, code: 2)
    }
}

/// The command's own options (--user U, --all, --unassigned, --broadcast), where
/// the command takes them, and the arguments left.
func commandOptions(of command: String, _ given: [String]) -> ParsedOptions {
    let allowed: [String: Set<String>] = ["status": ["json"], "get": ["user"], "list": ["user", "all", "json"],
                                          "grant": ["user"], "deny": ["user"], "reset": ["user", "unassigned"],
                                          "monitor": ["broadcast", "json"], "plugins": ["json"], "remotes": ["json"]]
    guard let names = allowed[command] else {
        // No app id, permission name or user name starts with "-": on a command without
        // options ("status --user 2", "assign --user 2 APP"), it is a misplaced option,
        // which must not be taken as an argument (request reads its --reason itself).
        if command != "request", let option = given.first(where: { $0.hasPrefix("-") }) {
            fail("\(command) takes no \(option)\nTry 'permissionsctl --help'.", code: 2)
        }
        return ParsedOptions(positional: given)
    }
    let specs = [OptionSpec("user", takesValue: true), OptionSpec("all"), OptionSpec("unassigned"),
                 OptionSpec("broadcast"), OptionSpec("json")]
    let options: ParsedOptions
    do {
        options = try parseOptions(given, specs: specs, stopAtFirstPositional: false)
    } catch {
        fail("\(error)\nTry 'permissionsctl --help'.", code: 2)
    }
    if let bad = options.values.first(where: { !names.contains($0.name) }) {
        fail("\(command) takes no --\(bad.name)\nTry 'permissionsctl --help'.", code: 2)
    }
    // Two different users would be a guess at which one was meant.
    if Set(options.all("user")).count > 1 {
        fail("--user given more than once: \(options.all("user").map { "\"\($0)\"" }.joined(separator: ", "))", code: 2)
    }
    if options.has("user"), options.has("all") || options.has("unassigned") {
        fail("--user cannot be given with --\(options.has("all") ? "all" : "unassigned")", code: 2)
    }
    return options
}

let options = commandOptions(of: command, Array(rest))
let arguments = options.positional
let jsonOutput = options.has("json")

if command == "settings" {
    guard arguments.count <= 2 else { fail("usage: permissionsctl settings [APP [PERMISSION]]", code: 2) }
    openSettingsPage(app: arguments.first ?? "", permission: arguments.dropFirst().first ?? "")
}

let client: Client
do {
    client = try Client(bus: bus)
} catch {
    if command == "doctor" {
        output("bus: cannot connect: \(error.message)\nproblems:\n  - no bus to find the service on")
        exit(1)
    }
    fail("cannot connect to the bus: \(error.message)")
}

func expectArguments(_ range: ClosedRange<Int>, _ synopsis: String) {
    guard range.contains(arguments.count) else { fail("usage: permissionsctl \(command) \(synopsis)", code: 2) }
}

/// The uid of a user name or a decimal uid. Only a string of digits alone is a
/// uid (useradd refuses such names); any other is a name, digits and all
/// ("alice2", "user1"), and must exist.
func resolveUser(_ text: String) -> UInt32 {
    if !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
        guard let uid = UInt32(text), uid != UInt32.max else {
            fail("invalid uid \"\(text)\": expected 0 to \(UInt32.max - 1)", code: 2)
        }
        return uid
    }
    guard !text.isEmpty, let entry = getpwnam(text) else { fail("unknown user \"\(text)\"", code: 2) }
    return entry.pointee.pw_uid
}

/// --user as a uid, if given.
let targetUser = options.last("user").map(resolveUser)

/// `member`, or its *ForUser twin with the uid first when --user was given.
func forUser(_ member: String, _ rest: DBusValue...) throws(BusError) -> [DBusValue] {
    guard let targetUser else { return try client.call(member, arguments: rest) }
    return try client.call(member + "ForUser", arguments: [.uint32(targetUser)] + rest)
}

/// reset's names that are neither a permission of the service nor stored for
/// `app` (for the user, or unassigned with --unassigned), if any: a name that is
/// stored still resets, so rows of a permission no plugin provides any more can
/// be cleaned up. Names that are no permission name at all are the service's to refuse.
func namesNeitherProvidedNorStored(app: String, _ names: [String]) throws(BusError) -> [String]? {
    let candidates = names.filter(Validate.isPermissionName)
    guard !candidates.isEmpty, Validate.isAppID(app) else { return nil }
    let provided = Set(try client.property("Permissions").stringArray ?? [])
    var unknown = candidates.filter { !provided.contains($0) }
    guard !unknown.isEmpty else { return nil }
    let stored: [String] = if options.has("unassigned") {
        (try client.call("ListAllDecisions", .string(app)).first?.arrayElements ?? []).compactMap { row in
            guard case .structure(let f) = row, f.count == 6, case .int64(let owner) = f[0], owner < 0 else { return nil }
            return f[2].stringValue
        }
    } else {
        (try forUser("ListDecisions", .string(app)).first?.arrayElements ?? []).compactMap { row in
            guard case .structure(let f) = row, f.count == 5 else { return nil }
            return f[1].stringValue
        }
    }
    unknown.removeAll { Set(stored).contains($0) }
    return unknown.isEmpty ? nil : unknown
}

do {
    switch command {
    case "status":
        expectArguments(0...1, "[--json] [PERMISSION]")
        if let permission = arguments.first {
            let details = try client.call("GetDetails", .string(permission)).first
            if jsonOutput { output(JSON(details ?? .vardict([])).text); break }
            for (key, value) in details?.stringKeyedEntries ?? [] { output(Format.detail(key, value)) }
        } else {
            let all = try AppCommands(bus: busOption).wait { try await $0.statuses() }.sorted { $0.key < $1.key }
            if jsonOutput { output(JSON.object(all.map { ($0.key.rawValue, .string($0.value.word)) }).text); break }
            output(Format.table(["PERMISSION", "STATUS"], all.map { [$0.key.rawValue, $0.value.word] }))
        }
    case "get":
        expectArguments(2...2, "[--user U] APP PERMISSION")
        let (app, permission) = (DBusValue.string(arguments[0]), DBusValue.string(arguments[1]))
        let status = if let targetUser { try client.call("GetStatusForUser", .uint32(targetUser), app, permission) }
                     else { try client.call("GetStatusForApp", app, permission) }
        output(status.first?.stringValue ?? "")
    case "list":
        expectArguments(0...1, "[--json] [--user U | --all] [APP]")
        let app = DBusValue.string(arguments.first ?? "")
        if options.has("all") {
            let rows = try client.call("ListAllDecisions", app).first?.arrayElements ?? []
            if jsonOutput { output(JSON.array(rows.map(Format.ownedDecisionObject)).text); break }
            output(Format.table(["USER", "APP", "PERMISSION", "DECISION", "SET AT", "SET BY"],
                                rows.map(Format.ownedDecisionRow)))
        } else {
            let rows = try forUser("ListDecisions", app).first?.arrayElements ?? []
            if jsonOutput { output(JSON.array(rows.map(Format.decisionObject)).text); break }
            output(Format.table(["APP", "PERMISSION", "DECISION", "SET AT", "SET BY"], rows.map(Format.decisionRow)))
        }
    case "grant", "deny":
        expectArguments(2...2, "[--user U] APP PERMISSION")
        let decision = command == "grant" ? "authorized" : "denied"
        let (app, permission) = (arguments[0], arguments[1])
        _ = try forUser("SetDecision", .string(app), .string(permission), .string(decision))
        // Stored; whether it is what the app now gets is another question (Override).
        let read = if let targetUser { try? client.call("GetStatusForUser", .uint32(targetUser), .string(app),
                                                        .string(permission)) }
                   else { try? client.call("GetStatusForApp", .string(app), .string(permission)) }
        if let status = read?.first?.stringValue,
           let note = Override.note(app: app, permission: permission, decision: decision, status: status) {
            printError("permissionsctl: note: \(note)")
        }
    case "reset":
        expectArguments(1...64, "[--user U | --unassigned] APP [PERMISSION...]")
        let (app, names) = (DBusValue.string(arguments[0]), DBusValue.strings(Array(arguments.dropFirst())))
        if let unknown = try namesNeitherProvidedNorStored(app: arguments[0], Array(arguments.dropFirst())) {
            fail("reset: \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")): no such permission, and nothing "
                 + "stored under \(unknown.count == 1 ? "that name" : "those names") for \(arguments[0]); nothing removed")
        }
        let removed = options.has("unassigned") ? try client.call("ResetUnassignedDecisions", app, names)
                                                       : try forUser("ResetDecisions", app, names)
        output("removed \(removed.first?.uint32Value ?? 0) decision(s)")
    case "assign":
        expectArguments(2...64, "APP USER [PERMISSION...]")
        let assigned = try client.call("AssignDecisions", .string(arguments[0]), .strings(Array(arguments.dropFirst(2))),
                                       .uint32(resolveUser(arguments[1])))
        output("assigned \(assigned.first?.uint32Value ?? 0) decision(s)")
    case "plugins":
        expectArguments(0...0, "[--json]")
        let plugins = try client.property("Plugins").arrayElements ?? []
        if jsonOutput { output(JSON.array(plugins.map(Format.pluginObject)).text); break }
        output(Format.table(["PLUGIN", "VERSION", "STATE", "PERMISSIONS"], plugins.map(Format.pluginRow)))
    case "remotes":
        expectArguments(0...0, "[--json]")
        let remotes = try client.call("ListPipeWireRemotes").first?.arrayElements ?? []
        if jsonOutput { output(JSON.array(remotes.map(Format.remoteObject)).text); break }
        output(Format.table(["ID", "USER", "APP", "PERMISSION", "STATUS", "OPENED AT"], remotes.map(Format.remoteRow)))
    case "monitor":
        expectArguments(0...0, "[--json] [--broadcast]")
        try client.monitor(broadcast: options.has("broadcast")) { output(jsonOutput ? $0.json.text : $0.text) }
    case "doctor":
        expectArguments(0...0, "")
        var doctor = Doctor(client: client, print: output)
        exit(doctor.run() ? 0 : 1)
    case "request":
        let synopsis = "usage: permissionsctl request [--reason TEXT] [--parent-window HANDLE] PERMISSION..."
        var names = arguments[...]
        var given: [String: String] = [:]
        // Its options come first, in either order: their values may be any text
        // ("-h", "--reason"), so nothing after them is read as an option.
        while let option = names.first, ["--reason", "--parent-window"].contains(option) {
            guard names.count >= 2 else { fail(synopsis, code: 2) }
            given[option] = names[names.startIndex + 1]
            names.removeFirst(2)
        }
        guard !names.isEmpty else { fail(synopsis, code: 2) }
        if let option = names.first(where: { $0.hasPrefix("-") }) {
            fail("request takes no \(option) (only --reason TEXT and --parent-window HANDLE, first)\n"
                 + "Try 'permissionsctl --help'.", code: 2)
        }
        var asked: [String] = []
        for name in names where !asked.contains(name) { asked.append(name) }
        var requestOptions: [(String, DBusValue)] = []
        if let reason = given["--reason"], !reason.isEmpty { requestOptions.append(("reason", .string(reason))) }
        if let window = given["--parent-window"] { requestOptions.append(("parent_window", .string(window))) }
        // One word for one permission (what a script compares), a table for several.
        func printStatuses(_ statuses: [String: String]) {
            if asked.count == 1 { return output(statuses[asked[0]] ?? "") }
            output(Format.table(["PERMISSION", "STATUS"], asked.map { [$0, statuses[$0] ?? ""] }))
        }
        client.connection.close()
        let request: HandleRequest
        do {
            request = try HandleRequest(bus: bus)
        } catch {
            fail("cannot connect to the bus: \(error.message)")
        }
        switch request.run(asked, options: requestOptions) {
        case .response(let code, let results):
            let entries = Dictionary(results, uniquingKeysWith: { first, _ in first })
            let statuses = Dictionary((entries["statuses"]?.stringKeyedEntries ?? []).map { ($0.0, $0.1.stringValue ?? "") },
                                      uniquingKeysWith: { first, _ in first })
            if !statuses.isEmpty { printStatuses(statuses) }
            switch code {
            case 0: break
            case 1: fail("request: the prompt was dismissed; nothing was stored")
            default:
                if let name = entries["error"]?.stringValue {
                    fail("request failed: \(entries["message"]?.stringValue ?? "") (\(name))")
                }
                fail("request ended without an answer (the agent did not answer in time, failed or went away); "
                     + "nothing was stored")
            }
        case .failed(let error):
            fail("\(error.message) (\(error.name))")
        case .interrupted:
            fail("request: interrupted; the request was closed and nothing was stored", code: 130)
        case .noStartRequest:
            // A service older than interface version 3: the blocking calls, which
            // ignore parent_window (unknown options are ignored).
            let fallback = try Client(bus: bus)
            let result = try fallback.call("RequestMany", .strings(asked), .vardict(requestOptions),
                                           timeout: Client.noTimeout)
            printStatuses(Dictionary((result.first?.stringKeyedEntries ?? []).map { ($0.0, $0.1.stringValue ?? "") },
                                     uniquingKeysWith: { first, _ in first }))
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
