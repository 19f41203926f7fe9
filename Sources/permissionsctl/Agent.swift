import CLISupport
import DBusKit
import Glibc
import PermissionsModel
internal import SystemPrimitives

/// `permissionsctl agent`: a terminal prompt agent. It registers an
/// org.example.Permissions.Agent object, prints each prompt, and reads the answer
/// as a line on standard input: o(nce), s(ession), a(lways), d(eny), or an empty
/// line to dismiss. Only lines that come while a prompt is shown answer: what
/// was typed or piped before is dropped (in a terminal, flushed). End of input
/// unregisters (the connection closes) and exits.
///
/// Everything runs on `queue`: the bus connection, the prompts and the stdin reader.
final class TerminalAgent: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on `queue`.
    static let path = "/org/example/PermissionsAgent"
    let queue = Queue(label: "permissionsctl.agent")
    let connection: Connection
    let print: (String) -> Void
    private var pending: [(id: String, call: MethodCall)] = []
    private var input: [UInt8] = []
    private var stdinSource: ReadSource?
    /// The service instance (its unique name) the last registration reached, and
    /// whether a registration is on its way. An owner the bus announces is
    /// registered with only if it is neither: the first RegisterAgent may be what
    /// starts the service (D-Bus activation), whose arrival is announced before
    /// the reply.
    private var registeredWith: String?
    private var registering = false
    /// An owner announced while a registration was on its way, for its reply to check.
    private var announced: String?

    init(bus: Bus, print: @escaping (String) -> Void) throws(BusError) {
        connection = try Connection.open(bus, queue: queue)
        self.print = print
    }

    func run() -> Never {
        queue.async { self.start() }
        runDispatchMain()
    }

    private func start() {
        connection.onDisconnect = { exit(1) }
        connection.onError = { [unowned self] error in self.print("D-Bus: \(error.message)") }
        connection.export(ExportedObject(path: Self.path, interfaces: [Interface(BusNames.agentInterfaceName, methods: [
            Method("Ask", input: "ssssa{sv}") { [unowned self] in self.ask($0) },
            Method("Cancel", input: "s") { [unowned self] in self.cancel($0) },
        ])], introspection: ""))
        // When the service restarts, register again with the new instance.
        connection.subscribe(SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                         interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                                         arg0: Client.name)) { [unowned self] message in
            let args = message.arguments()
            guard args.count == 3, let owner = args[2].stringValue, !owner.isEmpty else {
                // Its prompts went with it: an answer now would reach nobody, or be
                // taken for the answer to a prompt of the next instance.
                for (id, _) in self.pending { self.print("Prompt \(id) dropped: the service left") }
                self.registeredWith = nil
                self.pending.removeAll()
                self.input.removeAll()
                self.print("The service left the bus; waiting for it to come back")
                return
            }
            guard owner != self.registeredWith else { return }
            if self.registering { return self.announced = owner }
            self.register(first: false)
        }
        register(first: true)
    }

    private func register(first: Bool) {
        let register: Message
        do {
            register = try Message.methodCall(destination: Client.name, path: Client.path, interface: Client.interface,
                                              member: "RegisterAgent")
            try register.append(.objectPath(Self.path))
        } catch {
            fail(error.description)
        }
        registering = true
        connection.call(register) { [unowned self] result in
            self.registering = false
            let announced = self.announced
            self.announced = nil
            switch result {
            case .failure(let error):
                if first { fail("\(error.message) (\(error.name))") }
                self.print("Cannot register again: \(error.message)")
            case .success(let reply):
                self.registeredWith = reply.sender
                self.print("Agent registered at \(Self.path); waiting for prompts")
                if first { self.readStandardInput() }
            }
            // Another instance took the name meanwhile: this registration did not reach it.
            if let announced, announced != self.registeredWith { self.register(first: false) }
        }
    }

    private func ask(_ call: MethodCall) {
        let a = call.arguments
        let id = a[0].stringValue ?? "", app = a[1].stringValue ?? "", permission = a[2].stringValue ?? ""
        let reason = a[3].stringValue ?? ""
        if pending.isEmpty { dropEarlierInput() }
        pending.append((id, call))
        print("Prompt \(id): \(app.escapedForMessage) asks for \(permission)"
              + (reason.isEmpty ? "" : "\n  reason: \(reason.escapedForMessage)"))
        print("Answer [o]nce, [s]ession, [a]lways, [d]eny, or an empty line to dismiss:")
        answerFromBufferedInput()
    }

    private func cancel(_ call: MethodCall) {
        let id = call.arguments[0].stringValue ?? ""
        if let index = pending.firstIndex(where: { $0.id == id }) {
            pending.remove(at: index)
            print("Prompt \(id) cancelled")
        }
        call.reply()
    }

    private func readStandardInput() {
        let source = ReadSource(fileDescriptor: 0, queue: queue)
        source.setEventHandler { [unowned self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n: Int
            switch valueOrErrno({ buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) } }) {
            case .success(let count) where count > 0: n = count
            // Nothing to read after all: the source fires again when there is.
            case .failure(let error) where error.rawValue == EAGAIN: return
            default: exit(0)  // end of input: the bus unregisters us with the connection
            }
            // Input with no prompt on screen answers nothing: it was typed (or piped)
            // for no question, and must not answer the next one, of whatever app.
            guard !self.pending.isEmpty else {
                return self.print("Input ignored: no prompt is open")
            }
            self.input.append(contentsOf: buffer[0..<n])
            self.answerFromBufferedInput()
        }
        source.resume()
        stdinSource = source
    }

    /// A prompt appears with none before it on screen: whatever was read, or typed
    /// into the terminal and not read yet, came before any question and is dropped.
    private func dropEarlierInput() {
        input.removeAll()
        if isatty(0) != 0 { tcflush(0, TCIFLUSH) }
    }

    /// Answers the oldest prompt with each complete line typed so far.
    private func answerFromBufferedInput() {
        while !pending.isEmpty, let newline = input.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: input[..<newline], as: UTF8.self).trimmingWhitespace.lowercased()
            input.removeSubrange(...newline)
            let answer: String
            switch line {
            case "o", "once": answer = "allow-once"
            case "s", "session": answer = "allow-session"
            case "a", "always": answer = "allow-always"
            case "d", "deny": answer = "deny"
            case "": answer = "dismiss"
            default:
                print("Please answer o, s, a, d, or an empty line:")
                continue
            }
            let (id, call) = pending.removeFirst()
            call.reply([.string(answer), .vardict([])])
            print("Prompt \(id): \(answer)")
        }
    }
}

private func fail(_ message: String) -> Never {
    printError("permissionsctl: \(message)")
    exit(1)
}

extension String {
    var trimmingWhitespace: String {
        String(drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}
