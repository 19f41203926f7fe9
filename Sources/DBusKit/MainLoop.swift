internal import CDBus
internal import SystemPrimitives

// Runs a libdbus connection on a serial Queue: libdbus tells us which file
// descriptors to watch and which timeouts to arm (DBusWatch, DBusTimeout). The
// watches are served by the connection's I/O thread (IOThread.swift), the timeouts
// by dispatch timers on the queue. Nothing spins and nothing blocks on a peer: a
// peer that does not read its socket only fills libdbus's outgoing queue.
//
// libdbus calls these functions from inside its own calls, and every libdbus call on
// a connection happens on that connection's queue, so all of this runs there.

/// The timer that serves one `DBusTimeout`, armed on the connection's `Timers`
/// (dispatch timers, or a test's `ManualClock`).
///
/// `@unchecked Sendable`, so that the timer's handler may hold it: it is used only
/// on the connection's queue (libdbus calls the timeout functions from inside calls
/// made there, and the timers run there).
final class TimeoutSource: @unchecked Sendable {
    let timeout: OpaquePointer
    unowned let connection: Connection
    var timer: (any ArmedTimer)?

    init(timeout: OpaquePointer, connection: Connection) {
        self.timeout = timeout
        self.connection = connection
    }

    func update() {
        timer?.cancel()
        timer = nil
        guard dbus_timeout_get_enabled(timeout) != 0 else { return }
        let interval = Int(dbus_timeout_get_interval(timeout))
        timer = connection.timers.schedule(after: interval, repeating: interval, on: connection.queue) {
            [unowned self] in
            let c = self.connection
            // False only when libdbus ran out of memory; the timer repeats, which
            // is the retry libdbus asks for.
            _ = dbus_timeout_handle(self.timeout)
            c.dispatchPending()
        }
    }

    func cancel() {
        timer?.cancel()
        timer = nil
    }
}

// C callbacks: plain functions (never closures in main.swift, which Swift 6 would
// make @MainActor). `data` is the connection, passed unretained: the connection
// removes these functions before it is freed.

private func connection(_ data: UnsafeMutableRawPointer?) -> Connection {
    Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue()
}

private func releaseTimeoutSource(_ data: UnsafeMutableRawPointer?) {
    guard let data else { return }
    let source = Unmanaged<TimeoutSource>.fromOpaque(data).takeRetainedValue()
    source.cancel()
}

func mainLoopAddTimeout(_ timeout: OpaquePointer?, _ data: UnsafeMutableRawPointer?) -> dbus_bool_t {
    guard let timeout else { return 0 }
    let source = TimeoutSource(timeout: timeout, connection: connection(data))
    dbus_timeout_set_data(timeout, Unmanaged.passRetained(source).toOpaque(), releaseTimeoutSource)
    source.update()
    return 1
}

func mainLoopRemoveTimeout(_ timeout: OpaquePointer?, _ data: UnsafeMutableRawPointer?) {
    guard let timeout else { return }
    dbus_timeout_set_data(timeout, nil, nil)
}

func mainLoopToggleTimeout(_ timeout: OpaquePointer?, _ data: UnsafeMutableRawPointer?) {
    guard let timeout, let raw = dbus_timeout_get_data(timeout) else { return }
    Unmanaged<TimeoutSource>.fromOpaque(raw).takeUnretainedValue().update()
}

/// libdbus says more messages can be dispatched; we may be inside a libdbus call, so
/// dispatching now would re-enter it: schedule it instead.
func mainLoopDispatchStatusChanged(_ raw: OpaquePointer?, _ status: DBusDispatchStatus,
                                   _ data: UnsafeMutableRawPointer?) {
    guard status == DBUS_DISPATCH_DATA_REMAINS else { return }
    let c = connection(data)
    // The I/O thread dispatches right after handling input; no need to ask.
    if c.ioThread?.inIO == true { return }
    c.queue.async { c.dispatchPending() }
}

/// Every incoming message passes here first (one filter per connection).
func connectionFilter(_ raw: OpaquePointer?, _ message: OpaquePointer?,
                      _ data: UnsafeMutableRawPointer?) -> DBusHandlerResult {
    guard let message else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
    let connection = connection(data)
    if connection.routeFast(message) { return DBUS_HANDLER_RESULT_HANDLED }
    return connection.route(Message(borrowing: message))
        ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
}

/// A pending call finished (reply, error, or libdbus's own timeout error).
func pendingCallNotify(_ pending: OpaquePointer?, _ data: UnsafeMutableRawPointer?) {
    guard let pending, let data else { return }
    let box = Unmanaged<ReplyBox>.fromOpaque(data).takeUnretainedValue()
    guard let reply = dbus_pending_call_steal_reply(pending) else {
        box.deliver(.failure(BusError(BusError.noReply, "no reply")))
        return
    }
    let message = Message(owning: reply)
    box.deliver(message.asError.map { .failure($0) } ?? .success(message))
}

func releaseReplyBox(_ data: UnsafeMutableRawPointer?) {
    guard let data else { return }
    Unmanaged<ReplyBox>.fromOpaque(data).release()
}

/// Holds a reply handler until libdbus calls it exactly once (or frees it unused).
final class ReplyBox {
    private var handler: ((Result<Message, BusError>) -> Void)?
    init(_ handler: @escaping (Result<Message, BusError>) -> Void) { self.handler = handler }
    func deliver(_ result: Result<Message, BusError>) {
        let h = handler
        handler = nil
        h?(result)
    }
}
