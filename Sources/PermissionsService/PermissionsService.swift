package import PermissionsModel
package import DBusKit
internal import CPermissionsData
internal import Glibc
internal import SystemPrimitives
internal import PermissionsSupport
package import PermissionsStore
package import PermissionsIdentity

/// The org.example.Permissions object: combines plugin snapshots with stored
/// decisions into statuses, answers the methods, and emits StatusChanged exactly
/// once per real change.
///
/// Every method handler follows the same steps (hostnamed's recipe): read and
/// validate the arguments (InvalidArgument / UnknownPermission quoting the value),
/// identify and authorize the caller, change and save, emit signals, reply.
///
/// Confined to the connection's queue: the bus, the plugin host and the store are
/// all used from there only.
package final class PermissionsService {
    package static let busName = BusNames.busName
    package static let objectPath = BusNames.objectPath
    package static let interfaceName = BusNames.interfaceName
    package static let interfaceVersion = Versions.interface

    let connection: Connection
    /// Statuses, snapshots, decisions and session grants, and which changes to signal.
    package let tracker: StatusTracker
    var store: any DecisionStoring { tracker.store }
    /// The plugins' permissions and list (the plugin host, through PluginProviders).
    let plugins: any PluginProviders
    let callers: CallerCache
    let authorizer: Authorizer
    /// The daemon's calls to polkit and agents, with each user's share (OutgoingCalls).
    let outgoing: OutgoingCalls
    var broker: PromptBroker!
    /// Calls waiting for an answer, per connection and per user (PendingCalls.swift).
    var pendingCalls = PendingCalls()
    /// StartRequest's open handles (RequestHandles.swift).
    var requestHandles = RequestHandles()
    /// OpenPipeWireRemote's connections (EnforcedRemotes.swift).
    var remotes = EnforcedRemotes()
    /// [service] outgoing-calls=, outgoing-calls-per-user=, pending-calls-per-connection=,
    /// pending-calls-per-user=; agents-per-user=, requests-per-connection= and
    /// requests-per-user= are read where they apply.
    package var callLimits = CallLimits() {
        didSet {
            outgoing.limits = callLimits
            pendingCalls.limits = callLimits
        }
    }
    /// How long an agent may take to answer a prompt ([service] agent-timeout=).
    package var agentTimeoutMilliseconds: Int32 {
        get { broker.agentTimeoutMilliseconds }
        set { broker.agentTimeoutMilliseconds = newValue }
    }
    /// The serials of this start (SerialEpoch, ChangeSerials): ChangeSerial's, of the
    /// broadcast StatusChanged signals (everyone-level changes), and each
    /// subscriber stream's, all with this start's epoch, kept in the store, in the
    /// high 32 bits and a count of changes in the low 32 bits. Strictly increasing
    /// across restarts, with one write per start rather than one per change.
    var serials: ChangeSerials
    /// Called when the service cannot go on serving correctly (no new serial epoch
    /// can be stored); the daemon logs the reason and stops with a failure status.
    package var stopOnFault: (String) -> Void = { logError($0) }
    /// Subscribed connections (unique name) and the stream each is told.
    var subscribers: [String: Stream] = [:]
    /// Fires at the next decision expiry.
    var expiryTimer: TimerSource?
    /// True while expired decisions are being removed (their commit runs): they are
    /// still in memory, so the next expiry must not be taken from it until then.
    var expiring = false
    /// Per-permission answers when no agent is registered ([<permission>] no-agent=).
    package var noAgentDefaults: [String: Status] = [:]
    private var object: ExportedObject!
    private var lastPermissions: [String] = []
    /// While true (start-up, before the name is owned), snapshots are taken without signals.
    package var quiet: Bool {
        get { tracker.quiet }
        set { tracker.quiet = newValue }
    }
    /// See StatusTracker.
    package var disabledForLackOfConfiguration: Bool {
        get { tracker.disabledForLackOfConfiguration }
        set { tracker.disabledForLackOfConfiguration = newValue }
    }
    /// ConfigGeneration: configurations applied since start.
    private(set) var configGeneration: UInt32 = 0
    /// ConfigStatus: "ok", "kept: FILE:LINE: why" or "degraded: why".
    private(set) var configStatus = "ok"
    /// Calls that may still wait for an answer; shutdown answers them.
    var waitingCalls = WaitingCalls()
    /// Set by shutdown: nothing new is started.
    private(set) var stopping = false
    /// Users' decisions loaded when first needed (UserLoads.swift).
    let loads: UserLoads
    /// Users' decisions let go when they are not here (Residency.swift).
    let residency: Residency

    /// Throws `SerialEpochError` when this start cannot have a serial epoch (the
    /// stored one has no next, or the new one cannot be stored): the daemon then
    /// refuses to start, since serials it sent could repeat earlier ones.
    /// `residency`: how long users who are not here keep their decisions in memory,
    /// counted on `timers`.
    package init(connection: Connection, store: any DecisionStoring, plugins: any PluginProviders, callers: CallerCache,
                 authorizer: Authorizer, outgoing: OutgoingCalls, residency settings: ResidencySettings = ResidencySettings(),
                 timers: any Timers = DispatchTimers()) throws {
        // First, before anything is exported or hooked: the only step that can fail.
        serials = ChangeSerials(epoch: try store.nextEpoch(clockSeconds: currentMicroseconds() / 1_000_000))
        self.connection = connection
        self.tracker = StatusTracker(store: store, source: plugins)
        self.plugins = plugins
        self.callers = callers
        self.authorizer = authorizer
        self.outgoing = outgoing
        loads = UserLoads(store: store)
        residency = Residency(store: store, loads: loads, idleMilliseconds: settings.idleMilliseconds,
                              sweepMilliseconds: settings.sweepMilliseconds)
        connection.argumentLimits = Self.argumentLimits
        broker = PromptBroker(connection: connection, outgoing: outgoing,
                              settle: { [unowned self] in self.settle($0, $1, $2, $3, $4) },
                              undecided: { [unowned self] in self.undecided($0) })
        tracker.emit = { [unowned self] audience, app, permission, status in
            self.deliver(audience, app: app, permission: permission, status)
            // Connections handed out follow the status as apps are told it.
            if !self.remotes.byID.isEmpty { self.recheckRemotes(permission: permission) }
        }
        // Users with a subscriber or an enforced connection: their own view's changes
        // are computed (a connection follows its app's status as its user sees it).
        tracker.users = { [unowned self] in
            Array(Set(self.subscribedUsers(scripts: false) + self.remotes.users(scripts: false))).sorted()
        }
        tracker.scriptUsers = { [unowned self] in
            Array(Set(self.subscribedUsers(scripts: true) + self.remotes.users(scripts: true))).sorted()
        }
        callers.onLeave.append { [unowned self] name in
            // A connection left: its prompts, agents, subscription and session grants end.
            self.broker.peerLeft(name)
            self.requestHandlesLeft(name)
            self.subscribers[name] = nil
            self.tracker.ownerLeft(name)
        }
        // Rows with an end may have come in with a user.
        loads.onLoaded = { [unowned self] uid in
            logDebug("loaded the decisions of uid \(uid)")
            self.scheduleExpiry()
        }
        residency.onEvict = { uid in logDebug("let go of the decisions of uid \(uid)") }
        residency.pinned = { [unowned self] uid in self.holds(uid) || (settings.presencePins && self.isHere(uid)) }
        residency.start(timers: timers, queue: connection.queue)
        object = ExportedObject(path: Self.objectPath, interfaces: [makeInterface()],
                                introspection: Self.interfaceXML)
        connection.export(object)
        installFastPath()
    }

    /// The service object's `<interface>` in dbus/org.example.Permissions.xml, compiled in.
    static let interfaceXML = interfaceElement(BusNames.interfaceName)
    /// The one of a StartRequest's object (RequestHandles.swift), from the same file.
    static let requestHandleXML = interfaceElement(BusNames.requestHandleInterfaceName)

    /// The `<interface name="NAME">` element of the file, with the comments inside
    /// it, as Introspect returns it. Found with strstr on the compiled-in bytes: a
    /// String search goes Character by Character through the file's 50 KiB, about
    /// a millisecond of every start.
    private static func interfaceElement(_ name: String) -> String {
        let end = "</interface>"
        guard let file = permissions_interface_xml(), let start = strstr(file, "<interface name=\"\(name)\">"),
              let last = strstr(start, end) else { return "" }
        let element = UnsafeRawBufferPointer(start: start, count: last - start + end.utf8.count)
        return " " + String(decoding: element, as: UTF8.self) + "\n"
    }

    // MARK: State

    /// The value of the Plugins property last announced.
    private var lastPlugins: [PluginEntry] = []

    package var declared: [String: Snapshot] { tracker.declared }
    package var permissions: [String] { tracker.permissions }
    func isKnown(_ permission: String) -> Bool { tracker.isKnown(permission) }
    func snapshot(_ permission: String) -> Snapshot { tracker.snapshot(permission) }
    package func status(uid: UInt32, app: String, permission: String) -> Status {
        tracker.status(uid: uid, app: app, permission: permission)
    }

    /// Whose view a caller's own status is in: its user's, or, for a script, its
    /// user's without admin allow= entries (see Audience).
    func audience(of identity: AppIdentity) -> Audience {
        identity.kind == .script ? .script(identity.uid) : .user(identity.uid)
    }

    /// A caller's own status.
    func status(of identity: AppIdentity, permission: String) -> Status {
        tracker.status(audience(of: identity), app: identity.appID, permission: permission)
    }
    package func refresh(_ permission: String) { tracker.refresh(permission) }

    /// The configuration's interpreters ([identity] interpreters=; nil: the default
    /// list), for the callers identified from now on.
    package func setInterpreters(_ entries: [String]?) {
        callers.setInterpreters(Interpreters(entries ?? Interpreters.defaultEntries))
    }

    /// [identity] host-pid=, as a PID (the daemon resolves "self").
    package func setHostPID(_ pid: UInt32) {
        callers.setHostPID(pid)
    }

    /// What plugins published: each snapshot is taken as it comes (StatusTracker.publish).
    package func publish(_ publications: [Publication]) {
        for publication in publications { tracker.publish(publication) }
    }

    /// A plugin came, went or changed state: its permissions (those it declares and
    /// those it published) are looked at again, and the property changes announced.
    package func pluginChanged(permissions: Set<String>) {
        for permission in permissions { refresh(permission) }
        pluginsChanged()
    }

    /// Replaces the configuration-declared permissions.
    package func setDeclared(_ new: [String: Snapshot]) {
        tracker.setDeclared(new)
        pluginsChanged()
    }

    /// Holds back state changes (see `held`) until `releaseChanges`.
    package func holdChanges() {
        tracker.holdChanges()
    }

    /// Applies the changes held back, with their signals.
    package func releaseChanges() {
        guard tracker.isHolding else { return }
        tracker.releaseChanges()
        pluginsChanged()
    }

    /// Sets ConfigGeneration and ConfigStatus, with PropertiesChanged for what changed.
    package func setConfigState(generation: UInt32, status: String) {
        var changed: [String] = []
        if generation != configGeneration { changed.append("ConfigGeneration") }
        if status != configStatus { changed.append("ConfigStatus") }
        configGeneration = generation
        configStatus = status
        if !quiet, !changed.isEmpty {
            object.emitPropertiesChanged(on: connection, interface: Self.interfaceName, changed)
        }
    }

    /// Emits PropertiesChanged for Permissions and Plugins, each if it changed.
    package func pluginsChanged() {
        if tracker.isHolding { return }  // announced after the held changes, by releaseChanges
        let now = permissions
        let pluginsNow = plugins.pluginList
        var changed: [String] = []
        if now != lastPermissions { changed.append("Permissions") }
        if pluginsNow != lastPlugins { changed.append("Plugins") }
        lastPermissions = now
        lastPlugins = pluginsNow
        if !quiet, !changed.isEmpty {
            object.emitPropertiesChanged(on: connection, interface: Self.interfaceName, changed)
        }
    }

    // MARK: Interface

    private func makeInterface() -> Interface {
        Interface(Self.interfaceName, methods: [
            Method("GetStatus", input: "s") { [unowned self] in self.getStatus($0) },
            Method("GetAll") { [unowned self] in self.getAll($0) },
            Method("GetDetails", input: "s") { [unowned self] in self.getDetails($0) },
            Method("GetStatusForApp", input: "ss") { [unowned self] in self.getStatusForApp($0) },
            Method("GetDetailsForApp", input: "ss") { [unowned self] in self.getDetailsForApp($0) },
            Method("SetDecision", input: "sss") { [unowned self] in self.setDecision($0) },
            Method("ResetDecisions", input: "sas") { [unowned self] in self.resetDecisions($0) },
            Method("ListDecisions", input: "s") { [unowned self] in self.listDecisions($0) },
            Method("GetStatusForUser", input: "uss") { [unowned self] in self.getStatusForApp($0, forUser: true) },
            Method("SetDecisionForUser", input: "usss") { [unowned self] in self.setDecision($0, forUser: true) },
            Method("ResetDecisionsForUser", input: "usas") { [unowned self] in self.resetDecisions($0, forUser: true) },
            Method("ListDecisionsForUser", input: "us") { [unowned self] in self.listDecisions($0, forUser: true) },
            Method("ListAllDecisions", input: "s") { [unowned self] in self.listAllDecisions($0) },
            Method("AssignDecisions", input: "sasu") { [unowned self] in self.assignDecisions($0) },
            Method("ResetUnassignedDecisions", input: "sas") { [unowned self] in self.resetUnassigned($0) },
            Method("Subscribe", input: "a{sv}") { [unowned self] in self.subscribe($0) },
            Method("Unsubscribe") { [unowned self] in self.unsubscribe($0) },
            Method("Request", input: "sa{sv}") { [unowned self] in self.request($0) },
            Method("RequestMany", input: "asa{sv}") { [unowned self] in self.requestMany($0) },
            Method("StartRequest", input: "asa{sv}") { [unowned self] in self.startRequest($0) },
            Method("RegisterAgent", input: "o") { [unowned self] in self.registerAgent($0) },
            Method("UnregisterAgent", input: "o") { [unowned self] in self.unregisterAgent($0) },
            Method("GetDiagnostics") { [unowned self] in self.getDiagnostics($0) },
            Method("OpenPipeWireRemote", input: "sa{sv}") { [unowned self] in self.openPipeWireRemote($0) },
            Method("ListPipeWireRemotes") { [unowned self] in self.listPipeWireRemotes($0) },
        ], properties: [
            Property("Permissions") { [unowned self] in .strings(self.permissions) },
            Property("Plugins") { [unowned self] in
                .array(elementSignature: "(sssas)", self.plugins.pluginList.map { entry in
                    .structure([.string(entry.name), .string(entry.version), .string(entry.state),
                                .strings(entry.permissions)])
                })
            },
            Property("version") { .uint32(Self.interfaceVersion) },
            Property("ChangeSerial") { [unowned self] in .uint64(self.serials.last(.broadcast)) },
            Property("StoreStatus") { [unowned self] in .string(self.storeStatus) },
            Property("ConfigGeneration") { [unowned self] in .uint32(self.configGeneration) },
            Property("ConfigStatus") { [unowned self] in .string(self.configStatus) },
        ])
    }

    /// "ok", or "degraded: <why>" when start-up had to move a damaged store aside,
    /// or found one moved aside earlier (see DecisionStore). Fixed for the daemon's life.
    var storeStatus: String { store.degradedReason.map { "degraded: " + $0 } ?? "ok" }

    /// A known permission name, or the error to reply with.
    func knownPermission(_ value: DBusValue) -> Result<String, BusError> {
        let name = value.stringValue ?? ""
        guard Validate.isPermissionName(name) else { return .failure(PermissionsError.invalidPermissionName(name)) }
        guard isKnown(name) else { return .failure(PermissionsError.unknownPermission(name)) }
        return .success(name)
    }

    func validAppID(_ value: DBusValue) -> Result<String, BusError> {
        let id = value.stringValue ?? ""
        return Validate.isAppID(id) ? .success(id) : .failure(PermissionsError.invalidAppID(id))
    }

    /// Runs `body` with the caller's identity, or answers the call with the error.
    /// Every call that can wait (for the bus, polkit or a prompt) comes through
    /// here, and is remembered until it is answered. Counted while it waits
    /// (PendingCalls): per connection from here, per user once identified; over a
    /// limit, it fails with LimitExceeded. The caller's own decisions are loaded
    /// first; when they cannot be read, the call is answered StorageFailed, unless
    /// `evenIfUnreadable` (a reset, which may remove the rows that cannot be read).
    func withCaller(_ call: MethodCall, evenIfUnreadable: Bool = false, _ body: @escaping (AppIdentity) -> Void) {
        guard !stopping else { return call.fail(Self.stoppingError) }
        if let refusal = pendingCalls.admit(call) { return call.fail(refusal) }
        let sender = call.sender
        call.onAnswer = { [weak self] in self?.pendingCalls.release(sender: sender) }
        waitingCalls.add(call)
        callers.identify(call.sender) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let identity):
                // Answered meanwhile (Cancelled: the daemon is stopping): nothing more is done.
                guard !call.isAnswered else { return }
                if let refusal = self.pendingCalls.admit(call, uid: identity.uid) { return call.fail(refusal) }
                call.onAnswer = { [weak self] in
                    self?.pendingCalls.release(sender: sender)
                    self?.pendingCalls.release(uid: identity.uid)
                }
                self.whenLoaded(call, identity.uid, unreadable: evenIfUnreadable ? { _ in body(identity) } : nil) {
                    body(identity)
                }
            case .failure(let error): call.fail(PermissionsError.unknownCaller(error.message))
            }
        }
    }

    /// Runs `body` once `uid`'s decisions are in memory (UserLoads), or answers the
    /// call StorageFailed when they cannot be read (or, when given, runs
    /// `unreadable` with the load's error instead). The call stays counted as
    /// waiting meanwhile, which keeps the user here (Residency).
    func whenLoaded(_ call: MethodCall, _ uid: UInt32, unreadable: ((any Error) -> Void)? = nil,
                    _ body: @escaping () -> Void) {
        loads.whenLoaded(uid) { [weak self] loaded in
            guard let self, !call.isAnswered else { return }
            if case .failure(let error) = loaded {
                if let unreadable { return unreadable(error) }
                return call.fail(PermissionsError.storageFailed("cannot read the decisions of uid \(uid): \(error)"))
            }
            self.residency.touch(uid)
            body()
        }
    }

    static let stoppingError = PermissionsError.cancelled("the permissions service is stopping")

    /// From here on no prompt starts and no new call is served. The stop calls it
    /// before the store gives the commit in progress its outcomes: an answer stored
    /// then must not move a RequestMany on to ask its next permission.
    package func beginStopping() {
        stopping = true
        residency.stop()
    }

    /// The daemon stops: every call still waiting, for its caller's identity, for
    /// polkit or for a prompt (Request, RequestMany), is answered Cancelled; then
    /// the agents are told to close their open prompts, and none starts any more.
    /// Answered first, so that a prompt's end cannot run a waiter's continuation
    /// (RequestMany's next permission).
    package func shutdown() {
        beginStopping()
        for call in waitingCalls.held { call.fail(Self.stoppingError) }
        shutdownRequestHandles()
        broker.shutdown()
    }

}

extension Result {
    var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
