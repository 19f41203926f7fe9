internal import CAdw
internal import CAdwShims
internal import DesktopSupport
internal import Glibc
internal import PermissionsModel
internal import SystemPrimitives

/// The user's prompt agent: an org.example.Permissions.Agent object on a GDBus
/// connection, registered with the service (RegisterAgent) and again with every
/// new instance of it. Each Ask becomes a dialog; one is shown at a time, the rest
/// wait in order. Everything runs on the main thread, in GLib's main loop (see
/// DesktopSupport/Bus.swift for why GDBus).
///
/// The agent never times out a prompt of its own: an Ask is answered when the
/// person answers, or when the service cancels it (its agent-timeout, the app
/// gone, its stop). Its one outgoing call, RegisterAgent, is not a prompt.
final class PromptAgent {
    static let path = "/org/example/PermissionsPrompt"

    struct Prompt {
        let id: String
        let app: String
        let permission: String
        let reason: String
        let kind: String
        let accuracy: String?
        /// How many more prompts the service holds for this agent after this one
        /// (Ask's "queued"), when it was asked.
        let queued: Int
        /// The app's window (Ask's "parent-window"): "x11:XID" or "wayland:HANDLE".
        let parentWindow: String?
        /// Answered exactly once (g_dbus_method_invocation_return_* takes it).
        let invocation: OpaquePointer
    }

    let connection: OpaquePointer
    /// GVariant types, made once: GLib's G_VARIANT_TYPE("s") is a cast of a C string
    /// literal, and a Swift string passed to g_variant_type_checked_ lives only for
    /// that call, so the type it returns would point at freed memory.
    private let stringType = g_variant_type_new("s")!
    private let uint32Type = g_variant_type_new("u")!
    private let entryType = g_variant_type_new("{sv}")!
    /// The prompts not answered yet, the one shown first.
    private var prompts: [Prompt] = []
    /// The dialog of `prompts[0]`, while it is shown.
    private var dialog: UnsafeMutablePointer<GtkWidget>?
    /// The run of prompts the dialogs count ("2 of 3"): the number of the one
    /// shown last, and how many the run had then (it, those before it, and those
    /// waiting here and at the service). A prompt shown when none was expected any
    /// more starts a new run.
    private var position = 0
    private var runLength = 0
    /// The service instance (its unique name) the last registration reached: only
    /// it may ask. An owner the bus announces is registered with unless it is this
    /// one, or a registration is on its way (the first RegisterAgent may be what
    /// starts the service, whose arrival is announced before the reply).
    private var registeredWith: String?
    private var registering = false
    /// An owner announced while a registration was on its way, for its reply to check.
    private var announced: String?

    init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// The agent as C callbacks' user data: it lives as long as the program.
    private var userData: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
    private static func from(_ data: UnsafeMutableRawPointer?) -> PromptAgent {
        Unmanaged<PromptAgent>.fromOpaque(data!).takeUnretainedValue()
    }

    func start() throws(GLibError) {
        try export()
        g_bus_watch_name_on_connection(connection, BusNames.busName, G_BUS_NAME_WATCHER_FLAGS_NONE, { _, _, owner, data in
            PromptAgent.from(data).serviceAppeared(owner: String(cString: owner!))
        }, { _, _, data in
            PromptAgent.from(data).serviceLeft()
        }, userData, nil)
        register()
    }

    // MARK: The bus

    private static let introspection =
        "<node><interface name='org.example.Permissions.Agent'>"
        + "<method name='Ask'><arg type='s' direction='in'/><arg type='s' direction='in'/>"
        + "<arg type='s' direction='in'/><arg type='s' direction='in'/><arg type='a{sv}' direction='in'/>"
        + "<arg type='s' direction='out'/><arg type='a{sv}' direction='out'/></method>"
        + "<method name='Cancel'><arg type='s' direction='in'/></method>"
        + "</interface></node>"

    private func export() throws(GLibError) {
        var error: UnsafeMutablePointer<GError>?
        guard let node = g_dbus_node_info_new_for_xml(Self.introspection, &error) else { throw GLibError(taking: error) }
        // Copied by GDBus; the node's interface info is kept (referenced) by the registration.
        var vtable = GDBusInterfaceVTable()
        vtable.method_call = { _, sender, _, _, method, parameters, invocation, data in
            PromptAgent.from(data).handle(String(cString: method!), from: sender.map { String(cString: $0) },
                                          parameters!, invocation!)
        }
        let id = g_dbus_connection_register_object(connection, Self.path, node.pointee.interfaces[0], &vtable,
                                                   userData, nil, &error)
        g_dbus_node_info_unref(node)
        guard id != 0 else { throw GLibError(taking: error) }
    }

    private func register() {
        let message = g_dbus_message_new_method_call(BusNames.busName, BusNames.objectPath, BusNames.interfaceName,
                                                     "RegisterAgent")!
        var path = [g_variant_new_object_path(Self.path)]
        g_dbus_message_set_body(message, g_variant_new_tuple(&path, 1))
        registering = true
        g_dbus_connection_send_message_with_reply(connection, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, -1, nil, nil,
                                                  { source, result, data in
            PromptAgent.from(data).registered(result)
        }, userData)
        objectUnref(message)
    }

    private func registered(_ result: OpaquePointer?) {
        registering = false
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_send_message_with_reply_finish(connection, result, &error)
        if let reply, g_dbus_message_to_gerror(reply, &error) == 0 {
            registeredWith = g_dbus_message_get_sender(reply).map { String(cString: $0) }
            say("registered as the agent at \(Self.path) with \(registeredWith ?? "?"); waiting for prompts")
        } else {
            say("cannot register as the agent: \(GLibError(taking: error)); waiting for the service")
        }
        if let reply { objectUnref(reply) }
        // Another instance took the name meanwhile: this registration did not reach it.
        if let owner = announced {
            announced = nil
            if owner != registeredWith { register() }
        }
    }

    private func serviceAppeared(owner: String) {
        guard owner != registeredWith else { return }
        if registering { return announced = owner }
        register()
    }

    /// Its prompts went with it: an answer now would reach nobody.
    private func serviceLeft() {
        guard registeredWith != nil else { return }
        registeredWith = nil
        say("the service left the bus; waiting for it to come back")
        closeDialog()
        for prompt in prompts { reply(prompt, answer: "dismiss") }
        prompts.removeAll()
    }

    private func handle(_ method: String, from sender: String?, _ parameters: OpaquePointer,
                        _ invocation: OpaquePointer) {
        let arguments = (0..<g_variant_n_children(parameters)).map { g_variant_get_child_value(parameters, $0)! }
        defer { arguments.forEach { g_variant_unref($0) } }
        let strings = arguments.map { g_variant_is_of_type($0, stringType) != 0
                                      ? String(cString: g_variant_get_string($0, nil)) : "" }
        // Cancel("") is the service's check that its calls reach us: answered whoever
        // asks. Anything else only from the instance we registered with: another
        // peer on the bus must not put dialogs on the screen.
        if method == "Cancel", strings.first == "" { return g_dbus_method_invocation_return_value(invocation, nil) }
        guard sender != nil, sender == registeredWith else {
            return g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.AccessDenied",
                                                              "Only the service this agent registered with may call it")
        }
        switch method {
        case "Ask":
            let details = arguments[4]
            func detail(_ key: String) -> String? {
                guard let value = g_variant_lookup_value(details, key, stringType) else { return nil }
                defer { g_variant_unref(value) }
                return String(cString: g_variant_get_string(value, nil))
            }
            var queued = 0
            if let value = g_variant_lookup_value(details, "queued", uint32Type) {
                queued = Int(g_variant_get_uint32(value))
                g_variant_unref(value)
            }
            prompts.append(Prompt(id: strings[0], app: strings[1], permission: strings[2], reason: strings[3],
                                  kind: detail("identity-kind") ?? "", accuracy: detail("accuracy"),
                                  queued: queued, parentWindow: detail("parent-window"), invocation: invocation))
            say("prompt \(strings[0]): \(strings[1].escapedForMessage) asks for \(strings[2].escapedForMessage)")
            if dialog == nil { showFirst() }
        case "Cancel":
            g_dbus_method_invocation_return_value(invocation, nil)
            cancel(strings[0])
        default:
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.UnknownMethod", method)
        }
    }

    /// Answers `prompt`'s Ask (a prompt the service gave up is answered too, to
    /// free the call; the service drops that answer).
    private func reply(_ prompt: Prompt, answer: String) {
        var values = [g_variant_new_string(answer), g_variant_new_array(entryType, nil, 0)]
        g_dbus_method_invocation_return_value(prompt.invocation, g_variant_new_tuple(&values, 2))
    }

    // MARK: The dialogs

    private func cancel(_ id: String) {
        guard let index = prompts.firstIndex(where: { $0.id == id }) else { return }
        say("prompt \(id) cancelled")
        let prompt = prompts.remove(at: index)
        reply(prompt, answer: "dismiss")
        if index == 0 {
            closeDialog()
            showFirst()
        }
    }

    private func closeDialog() {
        guard let shown = dialog else { return }
        dialog = nil
        gtk_window_destroy(cast(shown))
    }

    /// The person answered (or dismissed) the dialog shown: its Ask gets the answer.
    fileprivate func responded(_ response: String, dialog answered: UnsafeMutablePointer<AdwMessageDialog>) {
        // A dialog closed by a Cancel, or by the service's leaving, answers nothing more.
        guard let shown = dialog, cast(shown) == answered, let prompt = prompts.first else { return }
        dialog = nil  // libadwaita closes it after the response
        prompts.removeFirst()
        let answer = Choice.answer(forResponse: response)
        say("prompt \(prompt.id): \(answer)")
        reply(prompt, answer: answer)
        showFirst()
    }

    private func showFirst() {
        guard dialog == nil, let prompt = prompts.first else { return }
        // Those after it: any held here (the service asks one at a time, so
        // normally none), and those the service said it holds.
        let after = prompts.count - 1 + prompt.queued
        position = position < runLength ? position + 1 : 1
        runLength = position + after
        let shown = PromptDialog.make(for: prompt, position: position, of: runLength)
        dialog = shown
        permissions_connect_response(cast(shown), { dialog, response, data in
            PromptAgent.from(data).responded(String(cString: response!), dialog: dialog!)
        }, userData, nil)
        if let parent = prompt.parentWindow {
            // Its surface exists once realized: made transient before it is mapped.
            gtk_widget_realize(shown)
            if !PromptDialog.setTransientFor(shown, parent) {
                say("prompt \(prompt.id): cannot put the dialog over the app's window \(parent.escapedForMessage) "
                    + "on this display")
            }
        }
        gtk_window_present(cast(shown))
        PromptDialog.keepFocusOnDontAllow(shown)
    }
}

/// A line on standard error: what the agent does, for a person running it in a
/// terminal and for the tests (which wait for "registered").
func say(_ line: String) { printError("permissions-prompt", line) }
