internal import CAdw
internal import DesktopSupport
internal import PermissionsModel

/// The page's tie to the service: it watches the service's name, subscribes to
/// its user's stream of StatusChanged (Subscribe, scope "user") whenever an
/// instance owns the name, and reads a new `Snapshot` after every change. A
/// restart (the name's owner gone) is reported at once, and the next instance is
/// subscribed to and read again. Runs on the main thread, in GLib's main loop
/// (GDBus delivers replies and signals there; DesktopSupport/Bus.swift says why).
final class ServiceLink {
    enum State: Equatable {
        /// No instance owns the name yet (`wasConnected`: one did before).
        case waiting(wasConnected: Bool)
        case connected
    }

    let connection: OpaquePointer
    /// Told of every change of state and every new snapshot.
    var onState: ((State) -> Void)?
    var onSnapshot: ((Snapshot) -> Void)?

    /// The unique name of the instance subscribed to: only its signals count
    /// (any peer can send a unicast signal).
    private(set) var owner: String?
    private var everConnected = false
    /// Pairs the stream named that the stored decisions may not hold (a session
    /// grant, a lock), and the app whose page is open: read with every snapshot.
    private var streamPairs: Set<Entry.Key> = []
    var pageApp: String? {
        didSet { if pageApp != oldValue { reload() } }
    }
    private var permissions: [String] = []
    private var reading = false
    private var readAgain = false

    init(connection: OpaquePointer) { self.connection = connection }

    func start() {
        // Only the stream's path: the broadcast (/org/example/Permissions) tells
        // nothing the stream does not, as it applies to this user.
        subscribeSignal(path: BusNames.objectPath + "/Subscription", interface: BusNames.interfaceName,
                        member: "StatusChanged") { link, parameters in link.statusChanged(parameters) }
        // A plugin's permissions coming or going (the Permissions property).
        subscribeSignal(path: BusNames.objectPath, interface: "org.freedesktop.DBus.Properties",
                        member: "PropertiesChanged") { link, _ in link.reload() }
        let userData = Unmanaged.passUnretained(self).toOpaque()
        g_bus_watch_name_on_connection(connection, BusNames.busName, G_BUS_NAME_WATCHER_FLAGS_AUTO_START,
                                       { _, _, owner, data in
            Unmanaged<ServiceLink>.fromOpaque(data!).takeUnretainedValue().appeared(String(cString: owner!))
        }, { _, _, data in
            Unmanaged<ServiceLink>.fromOpaque(data!).takeUnretainedValue().vanished()
        }, userData, nil)
    }

    private final class SignalHandler {
        let link: ServiceLink
        let body: (ServiceLink, Variant) -> Void
        init(_ link: ServiceLink, _ body: @escaping (ServiceLink, Variant) -> Void) { (self.link, self.body) = (link, body) }
    }

    /// Signals of `member` at `path`, from any sender: the sender is checked here
    /// against the owner of the service's name (see `owner`).
    private func subscribeSignal(path: String, interface: String, member: String,
                                 _ body: @escaping (ServiceLink, Variant) -> Void) {
        // The link lives as long as the program: the handler is never released.
        let handler = Unmanaged.passRetained(SignalHandler(self, body)).toOpaque()
        g_dbus_connection_signal_subscribe(connection, nil, interface, member, path, nil,
                                           G_DBUS_SIGNAL_FLAGS_NONE, { _, sender, _, _, _, parameters, data in
            let handler = Unmanaged<SignalHandler>.fromOpaque(data!).takeUnretainedValue()
            guard let sender, String(cString: sender) == handler.link.owner, let parameters else { return }
            handler.body(handler.link, Variant(taking: g_variant_ref(parameters)))
        }, handler, nil)
    }

    private func appeared(_ name: String) {
        guard name != owner else { return }
        owner = name
        callService(connection, "Subscribe", [Arguments.options(["scope": "user"])]) { result in
            guard self.owner == name else { return }
            switch result {
            case .success(let reply):
                say("subscribed to the service at \(name), serial \(reply.children.first?.uint64 ?? 0)")
            case .failure(let error):
                say("cannot subscribe to the service at \(name): \(error)")
            }
            self.everConnected = true
            self.onState?(.connected)
            self.reload()
        }
    }

    private func vanished() {
        if owner != nil { say("the service left the bus; reconnecting") }
        owner = nil
        streamPairs.removeAll()
        onState?(.waiting(wasConnected: everConnected))
    }

    private func statusChanged(_ parameters: Variant) {
        let fields = parameters.children
        guard fields.count == 4, let app = fields[0].string, let permission = fields[1].string else { return }
        if !app.isEmpty { streamPairs.insert(Entry.Key(app: app, permission: permission)) }
        reload()
    }

    /// Reads a snapshot now, or, while one is being read, once more after it (so
    /// that the last change is always in the last snapshot shown).
    func reload() {
        guard let reader = owner else { return }
        if reading { return readAgain = true }
        reading = true
        var pairs = Array(streamPairs)
        if let pageApp { pairs += permissions.map { Entry.Key(app: pageApp, permission: $0) } }
        SnapshotReader(connection: connection, extraPairs: pairs).read { result in
            self.reading = false
            guard self.owner == reader else { return }
            switch result {
            case .success(let snapshot):
                let known = snapshot.permissions.map(\.name)
                // A page opened before the permissions were known reads its pairs now.
                let missing = self.pageApp != nil && known != self.permissions
                self.permissions = known
                // Pairs the stream named that have nothing to show any more.
                let shown = Set(snapshot.entries.filter(\.isShown).map(\.key))
                self.streamPairs.formIntersection(shown)
                self.onSnapshot?(snapshot)
                say("showing \(snapshot.entries.filter(\.isShown).count) decisions of "
                    + "\(Set(snapshot.entries.filter(\.isShown).map(\.app)).count) apps")
                if missing { self.readAgain = true }
            case .failure(let error):
                say("cannot read the service's state: \(error)")
            }
            if self.readAgain {
                self.readAgain = false
                self.reload()
            }
        }
    }

    /// Stores `choice` for the pair (SetDecision, or ResetDecisions for "Ask next
    /// time"); `completion` gets the error, if any.
    func store(_ choice: Choice, for key: Entry.Key, then completion: @escaping (GLibError?) -> Void) {
        let app = Arguments.string(key.app)
        let done: (Result<Variant, GLibError>) -> Void = { result in
            if case .failure(let error) = result { return completion(error) }
            completion(nil)
        }
        switch choice {
        case .allow: callService(connection, "SetDecision", [app, Arguments.string(key.permission),
                                                             Arguments.string("authorized")], then: done)
        case .deny: callService(connection, "SetDecision", [app, Arguments.string(key.permission),
                                                            Arguments.string("denied")], then: done)
        case .ask: callService(connection, "ResetDecisions", [app, Arguments.strings([key.permission])], then: done)
        }
    }
}

/// A line on standard error: what the page does, for a person running it in a
/// terminal and for the tests (which wait for "subscribed" and "showing").
func say(_ line: String) { printError("permissions-settings", line) }
