/// The "parent_window" option of a request: the app's window, which an agent may
/// put its prompt over, in xdg-desktop-portal's notation. "x11:XID" with the X11
/// window id in hexadecimal, or "wayland:HANDLE" with a handle that the app
/// exported through xdg-foreign; "" is no window. The agent gets it as is, in
/// Ask's details ("parent-window"): the service cannot check that the window is
/// the app's, only that the text is one, so that an agent parsing it meets
/// nothing else.
public enum ParentWindow {
    /// Why `text` is not such a value, or nil.
    public static func problem(_ text: String) -> String? {
        if text.isEmpty { return nil }
        if text.hasPrefix("x11:") {
            let xid = text.utf8.dropFirst(4)
            let hex = xid.allSatisfy { b in
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(b)
                    || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(b)
            }
            // An XID is 32 bits: up to 8 hexadecimal digits, no "0x".
            return !xid.isEmpty && xid.count <= 8 && hex ? nil : "an X11 window is \"x11:\" and 1 to 8 hexadecimal digits"
        }
        if text.hasPrefix("wayland:") {
            let handle = text.utf8.dropFirst(8)
            // xdg-foreign handles are opaque strings; printable ASCII without spaces
            // is what compositors make, and what an agent can pass on safely.
            let printable = handle.allSatisfy { $0 > 0x20 && $0 < 0x7f }
            return !handle.isEmpty && handle.count <= 255 && printable ? nil
                : "a Wayland handle is \"wayland:\" and 1 to 255 printable ASCII characters without spaces"
        }
        return "expected \"x11:XID\" (hexadecimal) or \"wayland:HANDLE\""
    }
}
