import Foundation
import Testing
import PermissionsTestSupport

/// The WirePlumber drop-ins of dbus/wireplumber: with the real WirePlumber 0.4
/// (Debian 12's) beside a user's private PipeWire, a client connected as
/// permissionsd connects its apps (pipewire.access = "org.example.permissions", so
/// that PipeWire's module-access gives it nothing) gets nothing from WirePlumber,
/// even under a site rule that gives every restricted client "rx"; without the
/// drop-in the same site rule gives it "rx" (so these tests can fail). WirePlumber
/// 0.5, which Debian 12 lacks, is checked with PipeWire's own parser and rule
/// matcher (Tests/testenv/wprules.c). Every wait is for a line, with a deadline.
@Suite("WirePlumber drop-ins", .serialized)
struct WirePlumberTests {
    static let user: UInt32 = 1
    static let ourAccess = "org.example.permissions"
    static let dropIn04 = packageRoot + "/dbus/wireplumber/main.lua.d/60-org.example.Permissions-access.lua"
    static let dropIn05 = packageRoot + "/dbus/wireplumber/wireplumber.conf.d/90-org.example.Permissions-access.conf"

    /// A site rule as an administrator writes it in /etc/wireplumber/main.lua.d:
    /// every client whose access is anything but unrestricted may see and use
    /// everything read-only.
    static let siteRule = """
        {
          matches = {
            {
              { "pipewire.access", "matches", "*" },
              { "pipewire.access", "not-equals", "unrestricted" },
            },
          },
          default_permissions = "rx",
        }
        """

    /// Where a site puts its rule, and how.
    enum SiteStyle: String, CaseIterable, CustomTestStringConvertible {
        /// Added to the stock rules by a file read before ours.
        case appended
        /// A whole list of its own, put in place by a file read after ours.
        case replacedAfterOurs

        var testDescription: String { rawValue }

        var file: (name: String, text: String) {
            switch self {
            case .appended:
                ("51-site-access.lua", "table.insert(default_access.rules, \(WirePlumberTests.siteRule))\n")
            case .replacedAfterOurs:
                ("70-site-access.lua", "default_access.rules = {\n  \(WirePlumberTests.siteRule),\n}\n")
            }
        }
    }

    // MARK: WirePlumber 0.4

    @Test func aSiteRuleGivesOurClientsRxWithoutTheDropIn() throws {
        let root = try TestRuntimeRoot()
        let pipewire = try root.startPipeWire(Self.user)
        try pipewire.addCamera("cam")
        try pipewire.addMicrophone("mic")
        let wireplumber = try UserWirePlumber(pipewire, files: [SiteStyle.appended.file])
        defer { withExtendedLifetime((root, wireplumber)) {} }  // running until the end
        let app = try pipewire.app(access: Self.ourAccess)

        // WirePlumber matches it with the site rule: it is read and sees everything.
        let grant = try wireplumber.nextGrant()
        #expect(grant.permissions == "rx")
        #expect(try grant.client == pipewire.objectID("Client", "pipewire.access", Self.ourAccess))
        try app.lines.next { $0 == "synced" }
        let nodes = app.lines.all.filter { $0.hasPrefix("global ") && $0.contains(" Node perms=r-x- ") }
        #expect(nodes.contains { $0.hasSuffix(" node.name=cam") } && nodes.contains { $0.hasSuffix(" node.name=mic") },
                "\(app.lines.all)")
        #expect(app.lines.all.contains { $0.hasPrefix("global ") && $0.contains(" pipewire.access=\(Self.ourAccess) ") })
    }

    @Test(arguments: SiteStyle.allCases)
    func withTheDropInOurClientsGetNothingFromWirePlumber(site: SiteStyle) throws {
        let root = try TestRuntimeRoot()
        let pipewire = try root.startPipeWire(Self.user)
        try pipewire.addCamera("cam")
        let wireplumber = try UserWirePlumber(pipewire, files: [site.file, try UserWirePlumber.dropIn()])
        defer { withExtendedLifetime((root, wireplumber)) {} }
        let app = try pipewire.app(access: Self.ourAccess)

        // Our rule came first: its default is nothing.
        let grant = try wireplumber.nextGrant()
        #expect(grant.permissions == "-")
        #expect(try grant.client == pipewire.objectID("Client", "pipewire.access", Self.ourAccess))
        // A restricted client after it, which the site rule gives rx, is read once
        // WirePlumber's update for it is in: WirePlumber's update for ours, sent
        // before on the same connection, is in too.
        let probe = try pipewire.app(access: "restricted")
        try probe.lines.next { $0 == "synced" }
        // Ours is still not read: busy (its own line after 2 s), no registry.
        try app.errors?.next { $0 == "busy" }
        #expect(!app.lines.all.contains("synced") && !app.lines.all.contains { $0.hasPrefix("global ") },
                "\(app.lines.all)")
    }

    /// Permissions a manager gave object by object (as permissionsd does) stay as
    /// they are when WirePlumber starts later and takes the client in: with the
    /// drop-in, the client sees what it saw; without, the site rule widens it.
    @Test(arguments: [true, false])
    func aWirePlumberStartingLaterLeavesPerObjectGrantsAsTheyAre(dropIn: Bool) throws {
        let root = try TestRuntimeRoot()
        let pipewire = try root.startPipeWire(Self.user)
        try pipewire.addCamera("cam")
        try pipewire.addMicrophone("mic")
        let app = try pipewire.app(access: Self.ourAccess)
        try app.errors?.next { $0 == "busy" }
        let client = try pipewire.objectID("Client", "pipewire.access", Self.ourAccess)
        let camera = try pipewire.objectID("Node", "node.name", "cam")
        // The camera first: the client is read only once it has R on the core, and
        // then lists both at once.
        try pipewire.setPermissions(client: client, object: Int64(camera), "0500")
        try pipewire.setPermissions(client: client, object: 0, "0500")
        try app.lines.next { $0 == "synced" }
        let before = app.lines.all
        #expect(before.filter { $0.hasPrefix("global ") }.map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
                == ["global 0 Core", "global \(camera) Node"], "\(before)")

        let wireplumber = try UserWirePlumber(pipewire, files: [SiteStyle.appended.file]
                                              + (dropIn ? [try UserWirePlumber.dropIn()] : []))
        defer { withExtendedLifetime((root, wireplumber)) {} }
        let grant = try wireplumber.nextGrant()
        #expect(grant.client == client && grant.permissions == (dropIn ? "-" : "rx"), "\(grant)")
        if dropIn {
            // After WirePlumber's update (the probe, as above), a round trip: nothing new.
            let probe = try pipewire.app(access: "restricted")
            try probe.lines.next { $0 == "synced" }
            app.answer("sync")
            try app.lines.next { $0 == "synced" }
            #expect(app.lines.all == before + ["synced"])
        } else {
            try app.lines.next { $0.hasPrefix("global ") && $0.hasSuffix(" node.name=mic") }
            // The camera kept its own entry: no remove, no second global for it.
            #expect(!app.lines.all.contains("remove \(camera)")
                    && app.lines.all.filter { $0.hasPrefix("global \(camera) ") }.count == 1, "\(app.lines.all)")
        }
    }

    // MARK: WirePlumber 0.5

    /// The 0.5 drop-in as PipeWire's own tools parse it (spa-json-dump), and what
    /// its rule makes of clients among others' rules (wprules: PipeWire's parser and
    /// pw_conf_match_rules, as WirePlumber 0.5 applies access.rules).
    @Test func theDropInFor05ParsesAndSetsOurClientsDefaultToNothing() throws {
        let dump = try run("/usr/bin/spa-json-dump", [Self.dropIn05])
        #expect(dump.status == 0, "\(dump.stderr)")
        let parsed = try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any]
        let rules = parsed?["access.rules"] as? [[String: Any]]
        #expect(parsed?.count == 1 && rules?.count == 1, "\(dump.stdout)")
        let matches = rules?.first?["matches"] as? [[String: String]]
        #expect(matches == [["pipewire.access": Self.ourAccess]], "\(dump.stdout)")
        let update = (rules?.first?["actions"] as? [String: Any])?["update-props"] as? [String: Any]
        #expect(update?["default_permissions"] as? String == "-", "\(dump.stdout)")

        let directory = try makeTemporaryDirectory("wireplumber-05")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // An administrator's rule: every client with an access value, rx.
        let site = directory + "/50-site-access.conf"
        try """
            access.rules = [
              { matches = [ { pipewire.access = "~.*" } ] actions = { update-props = { default_permissions = "rx" } } }
            ]
            """.write(toFile: site, atomically: true, encoding: .utf8)
        let broken = directory + "/70-broken.conf"
        try "access.rules = [ { matches = [ { pipewire.access = \"x\" } ]\n".write(toFile: broken, atomically: true, encoding: .utf8)

        let ours = ["pipewire.access=\(Self.ourAccess)", "access=\(Self.ourAccess)", "application.name=app"]
        func outcome(_ files: [String], _ client: [String]) throws -> String {
            let r = try run(try WPRulesTool.path(), files + ["--"] + client)
            #expect(r.status == 0, "\(r.stderr)")
            return r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        }
        #expect(try outcome([Self.dropIn05], ours) == "default_permissions=-")
        #expect(try outcome([site], ours) == "default_permissions=rx")  // the site rule alone
        #expect(try outcome([site, Self.dropIn05], ours) == "default_permissions=-")
        #expect(try outcome([Self.dropIn05], ["pipewire.access=restricted", "access=restricted"])
                == "default_permissions=none")  // others' clients as before
        // The limit doc/admin.md tells of: a rule read after ours (/etc's, after
        // /usr/share's) that matches our clients wins.
        #expect(try outcome([Self.dropIn05, site], ours) == "default_permissions=rx")
        let refused = try run(try WPRulesTool.path(), [broken, "--"] + ours)
        #expect(refused.status == 1 && refused.stderr.contains("'}' missing at the end"), "\(refused.stderr)")
    }
}

/// WirePlumber 0.4 running as the user beside their PipeWire, with a configuration
/// directory of the test's (XDG_CONFIG_HOME/wireplumber: its main.lua.d files are
/// merged by name with /usr/share/wireplumber's, as /etc/wireplumber's are) and no
/// D-Bus: the two parts that need a session bus, the flatpak portal's permission
/// store and ALSA device reservation, are off (with either on, WirePlumber exits:
/// "Error acquiring bus address"). Its log is at info level, where the access
/// script says what it grants each client.
final class UserWirePlumber {
    private let configHome: String
    private let program: RunningProgram

    /// The drop-in as shipped, for `files`.
    static func dropIn() throws -> (name: String, text: String) {
        (URL(fileURLWithPath: WirePlumberTests.dropIn04).lastPathComponent,
         try String(contentsOfFile: WirePlumberTests.dropIn04, encoding: .utf8))
    }

    /// Starts WirePlumber with `files` (name, Lua text) in main.lua.d.
    init(_ pipewire: UserPipeWire, files: [(name: String, text: String)]) throws {
        configHome = try makeTemporaryDirectory("wireplumber-config")
        let mainLua = configHome + "/wireplumber/main.lua.d"
        try FileManager.default.createDirectory(atPath: mainLua, withIntermediateDirectories: true)
        // After 50-alsa-config.lua and 50-default-access-config.lua, which set these.
        let headless = ("51-test-headless.lua", """
            default_access.properties["enable-flatpak-portal"] = false
            alsa_monitor.properties["alsa.reserve"] = false

            """)
        for (name, text) in files + [headless] {
            try text.write(toFile: mainLua + "/" + name, atomically: true, encoding: .utf8)
        }
        for path in [configHome, configHome + "/wireplumber", mainLua] { chmod(path, 0o755) }
        for name in files.map(\.name) + [headless.0] { chmod(mainLua + "/" + name, 0o644) }
        program = try RunningProgram("/usr/bin/wireplumber", [], asUser: pipewire.uid, environment: [
            "PATH": "/usr/bin:/bin",
            "HOME": pipewire.runtimeDirectory,  // its state: ~/.local/state/wireplumber
            "XDG_RUNTIME_DIR": pipewire.runtimeDirectory,
            "XDG_CONFIG_HOME": configHome,
            "WIREPLUMBER_DEBUG": "3",
        ], collectingErrors: true)
    }

    /// Waits for the access script's next line about what it grants a client
    /// ("… Granting permissions to client 33: rx"): the client's id, and "rx", "-".
    func nextGrant() throws -> (client: UInt32, permissions: String) {
        guard let errors = program.errors else { throw HarnessError(description: "no log") }
        let line = try errors.next { $0.contains("Granting permissions to client ") }
        let words = line[line.range(of: "Granting permissions to client ")!.upperBound...].split(separator: " ")
        guard words.count == 2, words[0].hasSuffix(":"), let client = UInt32(words[0].dropLast())
        else { throw HarnessError(description: "unexpected line: \(line)") }
        return (client, String(words[1]))
    }

    deinit { try? FileManager.default.removeItem(atPath: configHome) }
}
