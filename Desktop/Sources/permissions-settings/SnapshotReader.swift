internal import DesktopSupport

/// Reads a `Snapshot`: the permissions (GetAll) and their device or service
/// state (GetDetails), the user's own stored decisions (ListDecisions, never
/// another user's), and for each (app, permission) pair to show its details
/// (GetDetailsForApp; from a service without it, interface version 4,
/// GetStatusForApp with the decision ListDecisions gave). All calls are made at
/// once and the snapshot is handed over when the last reply is in.
final class SnapshotReader {
    private let connection: OpaquePointer
    /// Pairs to read besides the stored decisions: those the stream named (a
    /// session grant, an administrator's lock) and the open app page's.
    private let extraPairs: [Entry.Key]
    private var snapshot = Snapshot()
    private var stored: [Entry.Key: String] = [:]
    private var pending = 0
    private var failure: GLibError?
    private var completion: ((Result<Snapshot, GLibError>) -> Void)?
    /// Whether the service has GetDetailsForApp (learned from the first answer).
    /// nonisolated(unsafe): only read and written on the main thread, where GDBus
    /// runs every reply of the program's connections.
    nonisolated(unsafe) static var hasDetailsForApp = true

    init(connection: OpaquePointer, extraPairs: [Entry.Key]) {
        self.connection = connection
        self.extraPairs = extraPairs
    }

    /// Reads, then calls `completion` once (on the main context). The reader
    /// keeps itself alive through its calls' closures until then.
    func read(then completion: @escaping (Result<Snapshot, GLibError>) -> Void) {
        self.completion = completion
        start()
        callService(connection, "GetAll") { result in
            self.finish(result) { reply in
                let names = PermissionName.sorted(Array((reply.children.first?.stringDictionary ?? [:]).keys))
                self.snapshot.permissions = names.map { PermissionState(name: $0, serviceState: "available",
                                                                         disabledBy: nil, devices: []) }
                for (index, name) in names.enumerated() { self.readState(of: name, at: index) }
            }
        }
        start()
        callService(connection, "ListDecisions", [Arguments.string("")]) { result in
            self.finish(result) { reply in
                for row in reply.children.first?.children ?? [] {
                    let fields = row.children
                    guard fields.count == 5, let app = fields[0].string, let permission = fields[1].string,
                          let decision = fields[2].string else { continue }
                    self.stored[Entry.Key(app: app, permission: permission)] = decision
                }
                var pairs = Array(self.stored.keys)
                pairs += self.extraPairs.filter { self.stored[$0] == nil }
                for pair in Set(pairs) { self.readEntry(pair) }
            }
        }
    }

    private func start() { pending += 1 }

    /// One reply in: `body` reads a success; the snapshot goes out after the last.
    /// A failed pair (`optional`: an app id the service refuses, a permission
    /// gone meanwhile) is left out; any other failure fails the reading.
    private func finish(_ result: Result<Variant, GLibError>, optional: Bool = false, _ body: (Variant) -> Void) {
        switch result {
        case .success(let reply): body(reply)
        case .failure(let error): if !optional { failure = failure ?? error }
        }
        pending -= 1
        guard pending == 0, let completion else { return }
        self.completion = nil
        if let failure { return completion(.failure(failure)) }
        snapshot.entries.sort { ($0.app, $0.permission) < ($1.app, $1.permission) }
        completion(.success(snapshot))
    }

    private func readState(of permission: String, at index: Int) {
        start()
        callService(connection, "GetDetails", [Arguments.string(permission)]) { result in
            self.finish(result) { reply in
                guard let details = reply.children.first else { return }
                let pluginDetails = details.lookup("plugin-details")?.stringDictionary ?? [:]
                let devices: [String] = details.lookup("devices")?.children.map { (device: Variant) -> String in
                    let fields = device.stringDictionary
                    return fields["description"] ?? fields["name"] ?? ""
                } ?? []
                self.snapshot.permissions[index] = PermissionState(
                    name: permission, serviceState: details.lookup("service-state")?.string ?? "available",
                    disabledBy: pluginDetails["disabled-by"], devices: devices.filter { !$0.isEmpty })
            }
        }
    }

    private func readEntry(_ pair: Entry.Key) {
        start()
        guard Self.hasDetailsForApp else { return readStatus(pair) }
        callService(connection, "GetDetailsForApp", [Arguments.string(pair.app), Arguments.string(pair.permission)]) {
            result in
            if case .failure(let error) = result, error.remoteName == "org.freedesktop.DBus.Error.UnknownMethod" {
                // A service of interface version 4: the status and the stored decision instead.
                Self.hasDetailsForApp = false
                self.pending -= 1
                return self.readEntry(pair)
            }
            self.finish(result, optional: true) { reply in
                guard let details = reply.children.first else { return }
                self.snapshot.entries.append(Entry(
                    app: pair.app, permission: pair.permission, status: details.lookup("status")?.string ?? "",
                    decision: details.lookup("decision")?.string ?? "none",
                    scope: details.lookup("decision-scope")?.string,
                    expiresAt: details.lookup("decision-expires-at")?.int64,
                    policy: details.lookup("policy")?.string ?? "none"))
            }
        }
    }

    private func readStatus(_ pair: Entry.Key) {
        callService(connection, "GetStatusForApp", [Arguments.string(pair.app), Arguments.string(pair.permission)]) {
            result in
            self.finish(result, optional: true) { reply in
                let status = reply.children.first?.string ?? ""
                let decision = self.stored[pair] ?? "none"
                let policy = status == "restricted" ? "restricted"
                    : status == "authorized" && decision != "authorized" ? "allow" : "none"
                self.snapshot.entries.append(Entry(
                    app: pair.app, permission: pair.permission, status: status, decision: decision,
                    scope: decision == "none" ? nil : "always", expiresAt: nil, policy: policy))
            }
        }
    }
}
