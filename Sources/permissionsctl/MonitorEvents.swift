import DBusKit

/// What `permissionsctl monitor` reports, printed as a text line or, with
/// `--json`, as one JSON object per line (its "event" names the kind).
enum MonitorEvent {
    /// The match rules are in force; `serial` is Subscribe's, `running` whether the
    /// service was on the bus (subscribed mode only).
    case monitoring(broadcast: Bool, serial: UInt64?, running: Bool)
    case statusChanged(app: String, permission: String, status: String, serial: UInt64?)
    case propertiesChanged([(String, DBusValue)])
    /// The service left the bus: its state may be stale until it returns.
    case serviceLeft
    /// The service (re)appeared at `owner`; `serial` is the new Subscribe's.
    case serviceReturned(owner: String, broadcast: Bool, serial: UInt64?)
    case subscribeFailed(BusError)

    var text: String {
        let name = Client.name
        switch self {
        case .monitoring(broadcast: true, _, _):
            return "Monitoring \(name) for broadcast StatusChanged and PropertiesChanged"
        case .monitoring(broadcast: false, let serial?, _):
            return "Monitoring \(name) for your StatusChanged (serial \(serial)) and PropertiesChanged"
        case .monitoring(broadcast: false, nil, _):
            return "Monitoring \(name) for your StatusChanged and PropertiesChanged once it runs"
        case .statusChanged(let app, let permission, let status, let serial):
            return "StatusChanged app=\(app.isEmpty ? "*" : app) permission=\(permission) status=\(status)"
                + (serial.map { " serial=\($0)" } ?? "")
        case .propertiesChanged(let changed):
            return "PropertiesChanged " + changed.map { "\($0.0)=\(Format.value($0.1))" }.joined(separator: " ")
        case .serviceLeft:
            return "\(name) left the bus"
        case .serviceReturned(let owner, broadcast: false, let serial):
            return "Subscribed to \(name) at \(owner) (serial \(serial ?? 0))"
        case .serviceReturned(let owner, broadcast: true, _):
            return "\(name) returned at \(owner)"
        case .subscribeFailed(let error):
            return "Cannot subscribe again to \(name): \(error.message) (\(error.name))"
        }
    }

    var json: JSON {
        func serialField(_ serial: UInt64?) -> [(String, JSON)] { serial.map { [("serial", .int($0))] } ?? [] }
        switch self {
        case .monitoring(let broadcast, let serial, let running):
            return .object([("event", .string("monitoring")), ("mode", .string(broadcast ? "broadcast" : "subscribed")),
                            ("running", .bool(running))] + serialField(serial))
        case .statusChanged(let app, let permission, let status, let serial):
            return .object([("event", .string("status-changed")), ("app", .string(app)),
                            ("permission", .string(permission)), ("status", .string(status))] + serialField(serial))
        case .propertiesChanged(let changed):
            return .object([("event", .string("properties-changed")),
                            ("properties", .object(changed.map { ($0.0, JSON($0.1)) }))])
        case .serviceLeft:
            return .object([("event", .string("service-left"))])
        case .serviceReturned(let owner, _, let serial):
            return .object([("event", .string("service-returned")), ("owner", .string(owner))] + serialField(serial))
        case .subscribeFailed(let error):
            return .object([("event", .string("error")), ("name", .string(error.name)),
                            ("message", .string(error.message))])
        }
    }
}
