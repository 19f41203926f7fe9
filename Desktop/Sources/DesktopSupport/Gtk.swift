public import CAdw
internal import Glibc

// GTK from Swift. GTK's constructors return `GtkWidget *` and its functions take
// their own class's pointer (`AdwMessageDialog *`, `GtkBox *`): the C casts
// (ADW_MESSAGE_DIALOG(w), GTK_BOX(w)) are macros, so `cast` does them.
//
// Threads: GTK and the desktop programs' GDBus connection run on the main thread,
// in GLib's main loop (`g_main_loop_run`); every callback below is called there.

/// The same object seen as another of its C types (GTK's checked-cast macros,
/// without the check).
@inline(__always)
public func cast<T, U>(_ pointer: UnsafeMutablePointer<T>, to _: U.Type = U.self) -> UnsafeMutablePointer<U> {
    UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: U.self)
}

/// The same, to a type whose struct GTK keeps private (`GtkLabel`, `GtkBox`),
/// which Swift sees as an `OpaquePointer`.
@inline(__always)
public func cast<T>(_ pointer: UnsafeMutablePointer<T>) -> OpaquePointer { OpaquePointer(pointer) }

/// From such a type to one Swift knows (`GtkWidget`).
@inline(__always)
public func cast<U>(_ pointer: OpaquePointer, to _: U.Type = U.self) -> UnsafeMutablePointer<U> {
    UnsafeMutablePointer<U>(pointer)
}

/// The translation of `text` in the desktop programs' gettext domain. Every string
/// a person sees goes through it, as a literal: xgettext has no Swift parser and
/// reads the sources as C (`--language=C --keyword=tr`, Desktop/po/update-pot), so
/// a translatable string has no interpolation; values go in afterwards with
/// `filling(_:)`. Not C's `_`: in Swift `_("…")` is a type placeholder, and the
/// escaped `` `_`("…") `` is invisible to xgettext's C reader.
public func tr(_ text: StaticString) -> String {
    text.withUTF8Buffer { buffer in
        String(cString: g_dgettext(gettextDomain, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)))
    }
}

/// The gettext domain of the desktop programs (their .pot is
/// `Desktop/po/permissions-desktop.pot`).
public let gettextDomain = "permissions-desktop"

/// Binds the gettext domain to the installed translations, once at start-up.
public func setUpTranslations(localeDirectory: String = "/usr/share/locale") {
    setlocale(LC_ALL, "")
    bindtextdomain(gettextDomain, localeDirectory)
    bind_textdomain_codeset(gettextDomain, "UTF-8")
}

extension String {
    /// A translated template with its `%s` places filled in order (a translation may
    /// move them, never add or drop one).
    public func filling(_ values: String...) -> String {
        var result = ""
        var rest = Substring(self)
        for value in values {
            guard let place = rest.indices.first(where: { rest[$0...].hasPrefix("%s") }) else { break }
            result += rest[..<place] + value
            rest = rest[rest.index(place, offsetBy: 2)...]
        }
        return result + rest
    }
}

/// A label of plain text: never markup, whatever the text holds.
public func plainLabel(_ text: String, cssClasses: [String] = []) -> UnsafeMutablePointer<GtkWidget> {
    let label = gtk_label_new(nil)!
    gtk_label_set_use_markup(cast(label), 0)
    gtk_label_set_text(cast(label), text)
    gtk_label_set_wrap(cast(label), 1)
    gtk_label_set_wrap_mode(cast(label), PANGO_WRAP_WORD_CHAR)
    gtk_label_set_xalign(cast(label), 0)
    for cssClass in cssClasses { gtk_widget_add_css_class(label, cssClass) }
    return label
}

/// A box of `children`, in order.
public func box(_ orientation: GtkOrientation, spacing: Int32,
                _ children: [UnsafeMutablePointer<GtkWidget>]) -> UnsafeMutablePointer<GtkWidget> {
    let box = gtk_box_new(orientation, spacing)!
    for child in children { gtk_box_append(cast(box), child) }
    return box
}

/// g_object_ref and g_object_unref for an object Swift sees as an `OpaquePointer`.
public func objectRef(_ object: OpaquePointer) { g_object_ref(UnsafeMutableRawPointer(object)) }
public func objectUnref(_ object: OpaquePointer) { g_object_unref(UnsafeMutableRawPointer(object)) }
