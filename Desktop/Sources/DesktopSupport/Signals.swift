public import CAdw
internal import CAdwShims

// Signal handlers as Swift closures. Each closure is retained by its connection
// and released by GLib's destroy notify when the connection goes (the object
// finalized), so a handler lives exactly as long as the signal can fire; a
// closure that refers back to its owner captures it weakly.

private final class Handler<Argument> {
    let body: (Argument) -> Void
    init(_ body: @escaping (Argument) -> Void) { self.body = body }
}

private let releaseHandler: GClosureNotify = { data, _ in
    Unmanaged<AnyObject>.fromOpaque(data!).release()
}

/// Runs `body` on `signal` of `instance`, a signal whose handler takes no
/// argument of its own ("clicked", "toggled", "search-changed", "activate").
public func connect<T>(_ instance: UnsafeMutablePointer<T>, _ signal: String, _ body: @escaping () -> Void) {
    let handler = Handler<Void> { _ in body() }
    permissions_connect_plain(UnsafeMutableRawPointer(instance), signal, { _, data in
        Unmanaged<Handler<Void>>.fromOpaque(data!).takeUnretainedValue().body(())
    }, Unmanaged.passRetained(handler as AnyObject).toOpaque(), releaseHandler)
}

/// The same for an object Swift sees as an `OpaquePointer`.
public func connect(_ instance: OpaquePointer, _ signal: String, _ body: @escaping () -> Void) {
    connect(UnsafeMutablePointer<GObject>(instance), signal, body)
}

/// Runs `body` with the parameter of each activation of `action`.
public func connectActivate(_ action: OpaquePointer, _ body: @escaping (Variant?) -> Void) {
    let handler = Handler<Variant?>(body)
    permissions_connect_action(action, { _, parameter, data in
        let value = parameter.map { Variant(taking: g_variant_ref($0)) }
        Unmanaged<Handler<Variant?>>.fromOpaque(data!).takeUnretainedValue().body(value)
    }, Unmanaged.passRetained(handler as AnyObject).toOpaque(), releaseHandler)
}

/// A search entry's placeholder text (the shim: GTK 4.8 has no setter).
public func setPlaceholderText(_ entry: UnsafeMutablePointer<GtkWidget>, _ text: String) {
    permissions_set_placeholder_text(entry, text)
}

/// The accessible name of `widget` (the shim over gtk_accessible_update_property).
public func setAccessibleLabel(_ widget: UnsafeMutablePointer<GtkWidget>, _ label: String) {
    permissions_set_accessible_label(widget, label)
}
