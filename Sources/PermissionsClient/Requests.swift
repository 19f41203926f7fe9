import DBusKit
import Dispatch
import PermissionsModel

extension PermissionsClient {
    /// Asks for `permission` as this app (`Request`) and returns the answer. When
    /// the status is `not-determined`, the user's agent prompts, and this waits as
    /// long as the user takes: the call has no timeout.
    ///
    /// Cancelling the calling task cancels the prompt: the request's connection
    /// leaves the bus, the service tells the agent `Cancel` and stores nothing, and
    /// this throws `.cancelled`. When the service leaves the bus while this waits,
    /// it throws `.serviceRestarted` and does not ask again (a second request could
    /// prompt twice; ask again if the user still wants to).
    ///
    /// - Parameters:
    ///   - reason: shown in the prompt ("to scan a document"); may be empty.
    /// - Throws: `.unknownPermission`, `.storageFailed` (the user's answer could not
    ///   be stored), `.cancelled`, `.serviceRestarted`, `.unavailable`, ….
    public func request(_ permission: Permission, reason: String = "") async throws(PermissionsClientError)
        -> PermissionStatus
    {
        let options = DBusValue.vardict(reason.isEmpty ? [] : [("reason", .string(reason))])
        let reply = try await ask("Request", [.string(permission.rawValue), options])
        return PermissionStatus(word: reply.first?.stringValue ?? "")
    }

    /// Asks for each of `permissions` in turn, as `request(_:reason:)` does, and
    /// yields each answer as it comes: the next prompt starts only after the
    /// previous one was answered. Ends after the last one, or with the first error
    /// (a `PermissionsClientError`): cancelling the consuming task (or dropping
    /// the stream) cancels the prompt under way and asks nothing more.
    public func request(_ permissions: [Permission], reason: String = "")
        -> AsyncThrowingStream<PermissionUpdate, any Error>
    {
        AsyncThrowingStream { continuation in
            let task = Task {
                for permission in permissions {
                    do {
                        let status = try await self.request(permission, reason: reason)
                        continuation.yield(PermissionUpdate(permission, status))
                    } catch {
                        continuation.finish(throwing: error)
                        return
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// One call that may wait for a prompt, on a request connection: an idle one,
    /// or a new one. The connection is kept for the next request only when the
    /// call was answered; otherwise (cancelled, service gone) it is closed, which
    /// is what tells the service that nobody waits any more.
    func ask(_ member: String, _ arguments: [DBusValue]) async throws(PermissionsClientError) -> [DBusValue] {
        if Task.isCancelled { throw PermissionsClientError.cancelledByTask }
        let link: RequestConnection
        if let idle = idleRequestConnections.withLock({ $0.popLast() }) {
            link = idle
        } else {
            link = try RequestConnection(bus: bus)
        }
        let pending = PendingRequest(link: link)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { done in
                pending.start(member, arguments, done: done)
            }
        } onCancel: {
            pending.cancel()
        }
        if case .success = result {
            idleRequestConnections.withLock { $0.append(link) }
        }
        return try result.get()
    }
}

/// A connection that requests are sent on, with its own queue.
///
/// `@unchecked Sendable`: `connection` and `closed` are used only on `queue`.
final class RequestConnection: @unchecked Sendable {
    let queue = DispatchQueue(label: "permissions-client.request")
    let connection: Connection
    private var closed = false

    init(bus: PermissionsClient.Bus) throws(PermissionsClientError) {
        do {
            connection = try Connection.open(bus.dbusKit, queue: queue)
        } catch {
            throw PermissionsClientError(.unavailable, name: error.name, message: "cannot connect to the bus: \(error.message)")
        }
    }

    /// Leaves the bus (on the queue): a prompt still waiting for this connection
    /// alone is cancelled by the service.
    func close() {
        queue.async { self.closeNow() }
    }

    func closeNow() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed else { return }
        closed = true
        connection.close()
    }
}

/// One request under way: its reply, the service leaving, or the task's
/// cancellation, whichever comes first, ends it once.
///
/// `@unchecked Sendable`: every field is used only on the link's queue.
final class PendingRequest: @unchecked Sendable {
    typealias Done = CheckedContinuation<Result<[DBusValue], PermissionsClientError>, Never>
    private let link: RequestConnection
    private var done: Done?
    private var cancelled = false
    private var finished = false
    private var ownerWatch: Int?

    init(link: RequestConnection) { self.link = link }

    /// Watches the service's owner, asks for it, and sends the call to that unique
    /// name: a call queued for a daemon that has since left is never delivered
    /// to the next one.
    func start(_ member: String, _ arguments: [DBusValue], done: Done) {
        link.queue.async { [self] in
            self.done = done
            if cancelled { return finish(.failure(.cancelledByTask)) }
            let connection = link.connection
            var owner: String?
            ownerWatch = connection.subscribe(
                SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                            member: "NameOwnerChanged", arg0: BusNames.busName),
                added: { [self] error in if let error { finish(.failure(PermissionsClientError(error))) } }
            ) { [self] message in
                let args = message.arguments()
                guard args.count == 3, let old = args[1].stringValue, let new = args[2].stringValue else { return }
                if let owner, old == owner { return finish(.failure(.serviceLeft(owner))) }
                if owner == nil, old.isEmpty, !new.isEmpty { owner = new }  // started by activation
            }
            connection.callBus("GetNameOwner", [.string(BusNames.busName)]) { [self] result in
                switch result {
                case .failure(let error) where error.name != BusError.nameHasNoOwner:
                    finish(.failure(error))
                case .failure:
                    // Not running: the well-known name, so that the bus may start it
                    // (D-Bus activation); its owner then comes in NameOwnerChanged.
                    send(member, arguments, to: BusNames.busName)
                case .success(let reply):
                    owner = reply.first?.stringValue
                    send(member, arguments, to: owner ?? BusNames.busName)
                }
            }
        }
    }

    /// DBUS_TIMEOUT_INFINITE: a prompt takes as long as the user does.
    private func send(_ member: String, _ arguments: [DBusValue], to destination: String) {
        link.connection.callService(member, arguments, destination: destination, timeout: Int32.max) { [self] in
            finish($0)
        }
    }

    func cancel() {
        link.queue.async { [self] in
            cancelled = true
            finish(.failure(.cancelledByTask))
        }
    }

    private func finish(_ result: Result<[DBusValue], PermissionsClientError>) {
        guard let done, !finished else { return }
        finished = true
        if case .success = result {
            if let ownerWatch { link.connection.unsubscribe(ownerWatch) }
        } else {
            link.closeNow()
        }
        done.resume(returning: result)
    }
}
