internal import DBusKit
internal import PermissionsModel
internal import PermissionsSupport
internal import SystemPrimitives

/// Calls waiting in the daemon for an answer (for the caller's identity, for
/// polkit, for a prompt), counted per connection and, once the caller is
/// identified, per user. Each one keeps its message and a closure; a connection
/// past `pendingCallsPerConnection`, or a user past `pendingCallsPerUser`, gets
/// LimitExceeded for its next call until some of its calls are answered. The bus
/// lets one connection wait for 128 replies on a stock system bus, and 50 000 on
/// a session bus; a user may hold 256 connections.
///
/// Confined to the service queue.
struct PendingCalls {
    var limits = CallLimits()
    private var byConnection: [String: Int] = [:]
    private var byUser: [UInt32: Int] = [:]

    /// Counts a call of `sender`'s, or returns the error when it holds its limit already.
    mutating func admit(_ call: MethodCall) -> BusError? {
        let held = byConnection[call.sender] ?? 0
        guard held < limits.pendingCallsPerConnection else {
            return PermissionsError.limitExceeded(
                "\(Self.member(call)): \(call.sender) has \(held) calls waiting in the daemon; the limit is "
                    + "\(limits.pendingCallsPerConnection) per connection ([service] pending-calls-per-connection)")
        }
        byConnection[call.sender] = held + 1
        return nil
    }

    /// Counts the call for `uid` as well, or returns the error.
    mutating func admit(_ call: MethodCall, uid: UInt32) -> BusError? {
        let held = byUser[uid] ?? 0
        guard held < limits.pendingCallsPerUser else {
            return PermissionsError.limitExceeded(
                "\(Self.member(call)): uid \(uid) has \(held) calls waiting in the daemon; the limit is "
                    + "\(limits.pendingCallsPerUser) per user ([service] pending-calls-per-user)")
        }
        byUser[uid] = held + 1
        return nil
    }

    /// Whether a call of `uid` waits in the daemon.
    func waiting(uid: UInt32) -> Bool { byUser[uid] != nil }

    mutating func release(sender: String) {
        let left = (byConnection[sender] ?? 0) - 1
        byConnection[sender] = left > 0 ? left : nil
    }

    mutating func release(uid: UInt32) {
        let left = (byUser[uid] ?? 0) - 1
        byUser[uid] = left > 0 ? left : nil
    }

    private static func member(_ call: MethodCall) -> String { (call.message.member ?? "").escapedForMessage }
}
