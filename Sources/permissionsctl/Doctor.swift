import DBusKit
import PermissionsModel

/// `permissionsctl doctor`: what a person needs to see why permissions misbehave,
/// each line a finding, then the problems found. No problem: exit 0; any: exit 1.
/// Without an agent for the caller's user, requests take each permission's
/// no-agent answer without asking: a note, not a problem (a server has none).
struct Doctor {
    let client: Client
    let print: (String) -> Void
    private(set) var problems: [String] = []

    init(client: Client, print: @escaping (String) -> Void) {
        self.client = client
        self.print = print
    }

    mutating func run() -> Bool {
        guard serviceIsThere() else { return report() }
        do throws(BusError) {
            let version = try client.property("version").uint32Value ?? 0
            let diagnostics = Dictionary(try client.call("GetDiagnostics").first?.stringKeyedEntries ?? [],
                                         uniquingKeysWith: { $1 })
            let daemon = diagnostics["version"]?.stringValue ?? "unknown"
            print("version: permissionsd \(daemon), interface version \(version)")
            if version != Versions.interface {
                print("  note: this permissionsctl speaks interface version \(Versions.interface)")
            }
            plugins(try client.property("Plugins").arrayElements ?? [])
            let generation = try client.property("ConfigGeneration").uint32Value ?? 0
            let config = try client.property("ConfigStatus").stringValue ?? ""
            print("config: \(config) (generation \(generation))")
            if config != "ok" { problems.append("config: \(config)") }
            let store = try client.property("StoreStatus").stringValue ?? ""
            print("store: \(store)")
            if store != "ok" { problems.append("store: \(store)") }
            caller(diagnostics)
        } catch {
            problems.append("the service answered \(error.name): \(error.message)")
        }
        return report()
    }

    /// The service's unique name, or the problem that it has none.
    private mutating func serviceIsThere() -> Bool {
        if let owner = try? client.busCall("GetNameOwner", .string(Client.name)).first?.stringValue {
            print("service: \(Client.name) at \(owner)")
            return true
        }
        let activatable = (try? client.busCall("ListActivatableNames").first?.stringArray) ?? nil
        if activatable?.contains(Client.name) == true {
            // A call starts it: go on, the calls below tell whether it can.
            print("service: \(Client.name) not running; D-Bus activation starts it")
            return true
        }
        print("service: \(Client.name) is not on the bus")
        problems.append("the service is not on the bus, and D-Bus activation cannot start it")
        return false
    }

    private mutating func plugins(_ rows: [DBusValue]) {
        print("plugins:" + (rows.isEmpty ? " none" : ""))
        if rows.isEmpty { problems.append("no plugin is loaded") }
        for row in rows.map(Format.pluginRow) where row.count == 4 {
            print("  \(row[0]) \(row[1]): \(row[2])" + (row[3].isEmpty ? "" : " (\(row[3]))"))
            if row[2] != "loaded" { problems.append("plugin \(row[0]) is \(row[2])") }
        }
    }

    private mutating func caller(_ diagnostics: [String: DBusValue]) {
        let uid = diagnostics["uid"]?.uint32Value.map(String.init) ?? "?"
        print("caller: app \(diagnostics["app-id"]?.stringValue ?? "?") "
              + "(\(diagnostics["identity-kind"]?.stringValue ?? "?")), uid \(uid)")
        // Older daemons lack these keys: nothing to report then.
        let host = diagnostics["host-namespace-problem"]?.stringValue ?? ""
        if !host.isEmpty {
            print("  host: \(host)")
            problems.append(host)
        }
        // (An unreadable host namespace is the reason then: said once, above.)
        if let reason = diagnostics["unverified-reason"]?.stringValue, !reason.isEmpty, reason != host {
            print("  unverified: \(reason)")
            problems.append("this caller is taken for unverified: \(reason)")
        }
        if diagnostics["has-agent"]?.boolValue == true {
            print("agent: registered for uid \(uid)")
            if let unreachable = diagnostics["agent-unreachable"]?.stringValue, !unreachable.isEmpty {
                print("  unreachable: \(unreachable)")
                problems.append("the agent of uid \(uid) cannot be reached: \(unreachable)")
            }
        } else {
            print("agent: none for uid \(uid)")
            print("  note: requests take each permission's no-agent answer without asking")
        }
    }

    private func report() -> Bool {
        if problems.isEmpty {
            print("no problems found")
        } else {
            print("problems:")
            for problem in problems { print("  - \(problem)") }
        }
        return problems.isEmpty
    }
}
