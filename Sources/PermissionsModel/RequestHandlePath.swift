/// The object path of a StartRequest, which a client computes before the call
/// (to subscribe to its Response first) and the service creates: the pattern of
/// xdg-desktop-portal's request objects, under our own path.
///
///     /org/example/Permissions/request/SENDER/TOKEN
///
/// SENDER is the caller's unique name without its ":", "." replaced by "_"; TOKEN
/// is the caller's handle_token, or one the service chose.
public enum RequestHandlePath {
    public static let prefix = BusNames.objectPath + "/request/"
    /// The longest handle_token taken, in bytes.
    public static let maxTokenLength = 64

    /// Why `token` is no handle_token (`[A-Za-z0-9_]+`, at most 64 characters), or nil.
    public static func tokenProblem(_ token: String) -> String? {
        let bytes = token.utf8
        if bytes.isEmpty { return "it is empty" }
        if bytes.count > maxTokenLength { return "it is \(bytes.count) bytes; the limit is \(maxTokenLength)" }
        let valid = bytes.allSatisfy { b in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "_")
        }
        return valid ? nil : "expected letters, digits and \"_\" only"
    }

    /// The path for `sender`'s `token` (a valid one). A unique name is ":" then
    /// elements of [A-Za-z0-9_-] joined by "."; "-" is not allowed in a path
    /// element, so it becomes "_" as well (no bus daemon we know of makes one).
    public static func path(sender: String, token: String) -> String {
        let element = String(sender.drop(while: { $0 == ":" }).map { $0 == "." || $0 == "-" ? "_" : $0 })
        return prefix + element + "/" + token
    }
}
