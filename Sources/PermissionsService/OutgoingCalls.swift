package import DBusKit
package import PermissionsModel
internal import PermissionsSupport

/// The daemon's calls that wait for a peer acting for one user: polkit's
/// CheckAuthorization for a caller of that uid, and every call to an agent of
/// that uid (Ask, Cancel, the reachability check). Each user gets a share, under a
/// total for all users.
///
/// Why: the bus counts every call the daemon's one connection waits on against
/// that connection (max_replies_per_connection: 128 on a stock system bus; calls
/// to the bus driver itself are not counted). A user's own polkit agent that never
/// finishes an authentication keeps that user's checks pending, as can an agent
/// that never answers; without shares, 128 of them made every other user's check,
/// prompt and registration fail with the bus's LimitsExceeded. With them, a user
/// over their share gets `LimitExceeded` (nothing is sent), and the others never
/// notice: the total stays below the bus's limit, with the rest kept for the
/// daemon's own calls.
///
/// Confined to the connection's queue.
package final class OutgoingCalls {
    private let connection: Connection
    /// `outgoingCalls` and `outgoingCallsPerUser` are this one's.
    package var limits = CallLimits()
    /// Calls pending now, for every user together.
    package private(set) var pending = 0
    private var pendingByUser: [UInt32: Int] = [:]
    /// Users whose refusal was logged, until they hold no call; and whether the
    /// total's was, until half of it is free: one line a stretch, not one a call.
    private var loggedUsers = Set<UInt32>()
    private var loggedTotal = false

    package init(connection: Connection) {
        self.connection = connection
    }

    /// Calls pending now for `uid`.
    package func pending(for uid: UInt32) -> Int { pendingByUser[uid] ?? 0 }

    /// Sends `message` for `uid`; `reply` runs once, later, on the queue: with the
    /// reply, the peer's error, or `LimitExceeded` (then nothing was sent) when
    /// the user's share or the total is taken. The bus's own LimitsExceeded (a bus
    /// configured with fewer pending replies than the total) becomes
    /// `LimitExceeded` too.
    package func call(_ message: Message, for uid: UInt32, timeoutMilliseconds: Int32,
                      reply: @escaping (Result<Message, BusError>) -> Void) {
        if let refusal = refusal(for: uid, member: message.member ?? "") {
            connection.async { reply(.failure(refusal)) }
            return
        }
        pending += 1
        pendingByUser[uid, default: 0] += 1
        connection.call(message, timeoutMilliseconds: timeoutMilliseconds) { [weak self] result in
            self?.release(uid)
            reply(Self.translated(result))
        }
    }

    /// Whether `error` is this limit's (or the bus's): the caller's call fails with it as it is.
    package static func isLimit(_ error: BusError) -> Bool {
        error.name == PermissionsError.prefix + ErrorName.limitExceeded
    }

    private func refusal(for uid: UInt32, member: String) -> BusError? {
        let mine = pending(for: uid)
        if mine >= limits.outgoingCallsPerUser {
            if loggedUsers.insert(uid).inserted {
                logWarning("uid \(uid) has \(mine) calls of the daemon's pending to polkit or its agents, its share "
                           + "([service] outgoing-calls-per-user=\(limits.outgoingCallsPerUser)); its further calls get "
                           + "LimitExceeded until they are answered (an authentication or prompt agent that does not answer?)")
            }
            return PermissionsError.limitExceeded(
                "\(member) not sent: the daemon has \(mine) calls pending for uid \(uid) (polkit checks, agent calls); "
                    + "the limit is \(limits.outgoingCallsPerUser) per user ([service] outgoing-calls-per-user)")
        }
        if pending >= limits.outgoingCalls {
            if !loggedTotal {
                loggedTotal = true
                logWarning("the daemon has \(pending) calls pending to polkit and agents for users, all it may "
                           + "([service] outgoing-calls=\(limits.outgoingCalls)); further ones get LimitExceeded")
            }
            return PermissionsError.limitExceeded(
                "\(member) not sent: the daemon has \(pending) calls pending for users (polkit checks, agent calls); "
                    + "the limit is \(limits.outgoingCalls) ([service] outgoing-calls)")
        }
        return nil
    }

    private func release(_ uid: UInt32) {
        pending -= 1
        let left = pending(for: uid) - 1
        pendingByUser[uid] = left > 0 ? left : nil
        if left <= 0 { loggedUsers.remove(uid) }
        if pending <= limits.outgoingCalls / 2 { loggedTotal = false }
    }

    private static func translated(_ result: Result<Message, BusError>) -> Result<Message, BusError> {
        guard case .failure(let error) = result, error.name == "org.freedesktop.DBus.Error.LimitsExceeded" else {
            return result
        }
        return .failure(PermissionsError.limitExceeded("the bus refused the daemon's call: \(error.message)"))
    }
}
