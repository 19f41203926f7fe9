// The calls the benchmarks make, each built afresh per call (a message is sent
// once), with the targets every benchmark knows: permissionsd, the floors (C and
// DBusKit), the peer.
import DBusKit
import Foundation

/// One method to call over and over.
final class CallTarget: Sendable {
    let label: String
    let destination: String
    let path: String
    let interface: String
    let member: String
    let arguments: [DBusValue]
    /// For writes: the arguments of a writer's `n`th call, so that each call changes
    /// something (a write that changes nothing is not written); nil: always `arguments`.
    let write: (@Sendable (_ writer: Int, _ n: Int) -> [DBusValue])?

    init(_ label: String, destination: String, path: String, interface: String, member: String,
         _ arguments: [DBusValue] = [], write: (@Sendable (Int, Int) -> [DBusValue])? = nil) {
        self.label = label
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
        self.write = write
    }

    func message(writer: Int = 0, n: Int = 0) -> Message {
        do throws(BusError) {
            let m = try Message.methodCall(destination: destination, path: path, interface: interface, member: member)
            try m.append(write?(writer, n) ?? arguments)
            return m
        } catch {
            fail("cannot build \(member): \(error)")
        }
    }

    /// SetDecision by writer `w`: its own app, flipped on each call (one connection's
    /// calls are answered in order, so each is a change, and a durable write).
    static let setDecision = CallTarget("permissionsd SetDecision", destination: "org.example.Permissions",
                                            path: "/org/example/Permissions", interface: "org.example.Permissions",
                                            member: "SetDecision") { w, n in
        [.string("org.example.Writer\(w)"), .string("location"), .string(n % 2 == 0 ? "authorized" : "denied")]
    }

    /// xdg-permission-store's SetPermission by writer `w`: its own entry, flipped.
    static let peerSetPermission = CallTarget("xdg-permission-store SetPermission", destination: corePeerBusName,
                                                  path: corePeerPath, interface: corePeerBusName,
                                                  member: "SetPermission") { w, n in
        [.string("bench"), .boolean(true), .string("writer\(w)"), .string("org.example.App"),
         .strings([n % 2 == 0 ? "yes" : "no"])]
    }

    static func getStatus(_ permission: String) -> CallTarget {
        CallTarget("permissionsd GetStatus(\(permission))", destination: "org.example.Permissions",
                       path: "/org/example/Permissions", interface: "org.example.Permissions", member: "GetStatus",
                       [.string(permission)])
    }

    static let floorPing = CallTarget("floor Peer.Ping", destination: coreFloorBusName, path: coreFloorPath,
                                          interface: "org.freedesktop.DBus.Peer", member: "Ping")

    static let floorStatus = CallTarget("floor Status(s)", destination: coreFloorBusName, path: coreFloorPath,
                                            interface: coreFloorInterface, member: "Status", [.string("location")])

    static let cFloorPing = CallTarget("C floor Peer.Ping", destination: coreCFloorBusName, path: coreFloorPath,
                                           interface: "org.freedesktop.DBus.Peer", member: "Ping")

    static let cFloorStatus = CallTarget("C floor Status(s)", destination: coreCFloorBusName, path: coreFloorPath,
                                             interface: coreFloorInterface, member: "Status", [.string("location")])

    static let peerLookup = CallTarget("xdg-permission-store Lookup", destination: corePeerBusName,
                                           path: corePeerPath, interface: corePeerBusName, member: "Lookup",
                                           [.string("bench"), .string("camera")])
}

let corePeerBusName = "org.freedesktop.impl.portal.PermissionStore"
let corePeerPath = "/org/freedesktop/impl/portal/PermissionStore"
