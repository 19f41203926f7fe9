internal import Glibc

/// Who a caller is, from its bus credentials.
public struct AppIdentity: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// From a systemd app scope or service (XDG desktop spec naming).
        case systemdUnit = "systemd-unit"
        /// The caller's executable path.
        case executable
    }

    public var appID: String
    public var kind: Kind
    public var uid: UInt32
    public var pid: UInt32
}

/// Works out an app id from a process, reading `/proc` (or a stand-in tree for tests).
///
/// Order (PRODUCT.md): a systemd app scope or service named by the XDG desktop spec,
/// `app[-<launcher>]-<app id>-<random>.scope` or `app[-<launcher>]-<app id>[@<random>].service`;
/// then the executable path. Flatpak and snap come first once supported.
public struct IdentityReader: Sendable {
    public var procRoot: String

    public init(procRoot: String = "/proc") { self.procRoot = procRoot }

    public enum Failure: Error, Equatable {
        /// The process is gone, or its entries cannot be read.
        case unreadable(String)
        /// What it claims as an app id is not one.
        case invalid(String)
    }

    public func identify(pid: UInt32, uid: UInt32) -> Result<AppIdentity, Failure> {
        let base = "\(procRoot)/\(pid)"
        if let cgroup = Files.readText(base + "/cgroup", limit: 65536),
           let unit = Self.unitName(fromCgroup: cgroup),
           let appID = Self.appID(fromUnit: unit)
        {
            // A unit names an app, never a path: "/usr/bin/sudo" from a unit is forged.
            guard Validate.isAppID(appID), !appID.hasPrefix("/") else { return .failure(.invalid(appID)) }
            return .success(AppIdentity(appID: appID, kind: .systemdUnit, uid: uid, pid: pid))
        }
        guard var exe = Files.readLink(base + "/exe") else {
            return .failure(.unreadable("cannot read \(base)/exe"))
        }
        if exe.hasSuffix(" (deleted)") { exe.removeLast(" (deleted)".count) }
        guard Validate.isAppID(exe), exe.hasPrefix("/") else { return .failure(.invalid(exe)) }
        return .success(AppIdentity(appID: exe, kind: .executable, uid: uid, pid: pid))
    }

    /// The last path element of the unified (`0::`) cgroup line.
    static func unitName(fromCgroup text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return line.split(separator: "/").last.map(String.init)
        }
        return nil
    }

    /// The app id in a systemd unit name that follows the XDG desktop spec, unescaped
    /// (`\x2d` is "-"); nil for any other unit.
    static func appID(fromUnit unit: String) -> String? {
        guard unit.hasPrefix("app-") else { return nil }
        var body = Substring(unit.dropFirst(4))
        if body.hasSuffix(".scope") {
            body = body.dropLast(6)
            guard let dash = body.lastIndex(of: "-") else { return nil }   // "-<random>"
            body = body[..<dash]
        } else if body.hasSuffix(".service") {
            body = body.dropLast(8)
            if let at = body.firstIndex(of: "@") { body = body[..<at] }
        } else {
            return nil
        }
        // An optional "<launcher>-" prefix; the app id's own dashes are escaped.
        if let dash = body.firstIndex(of: "-") { body = body[body.index(after: dash)...] }
        guard !body.isEmpty else { return nil }
        return unescape(String(body))
    }

    /// systemd's unit name escaping: `\xNN` for a byte.
    static func unescape(_ s: String) -> String {
        var bytes: [UInt8] = []
        let input = Array(s.utf8)
        var i = 0
        while i < input.count {
            if input[i] == UInt8(ascii: "\\"), i + 3 < input.count, input[i + 1] == UInt8(ascii: "x"),
               let value = UInt8(String(decoding: input[(i + 2)...(i + 3)], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                i += 4
            } else {
                bytes.append(input[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
