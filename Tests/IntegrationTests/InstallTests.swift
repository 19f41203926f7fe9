import Foundation
import Testing
import PermissionsTestSupport

/// scripts/install and scripts/uninstall, for real: files in their FHS places, a
/// unit that passes systemd-analyze, an installed daemon that runs with the Swift
/// toolchain hidden, started by D-Bus activation through the installed activation
/// file, under the installed bus policy, extended by a plugin built from the
/// installed SDK alone; then uninstalled. The desktop's agent is installed beside
/// them (and left out by --no-desktop), and neither the daemon nor the client loads
/// GTK. The helpers are in InstallHarness.swift.
@Suite(.serialized) struct InstallTests {
    // MARK: A DESTDIR install

    @Test func destdirInstallPutsEveryFileInItsFHSPlace() throws {
        let stage = try makeTemporaryDirectory("install-destdir")
        defer { try? FileManager.default.removeItem(atPath: stage) }
        // A DESTDIR that does not exist yet, as a package build's usually does not.
        try FileManager.default.removeItem(atPath: stage)
        try Installing.install(["--destdir", stage, "--prefix", "/usr"])

        // Where dbus-daemon, polkit and systemd look, whatever the prefix.
        let dbusPolicy = try Installing.pkgconfig("dbus-1", "datadir") + "/dbus-1/system.d"
        let dbusServices = try Installing.pkgconfig("dbus-1", "system_bus_services_dir")
        var polkit = try Installing.pkgconfig("polkit-gobject-1", "policydir")
        if polkit.isEmpty { polkit = "/usr/share/polkit-1/actions" }
        let units = try Installing.pkgconfig("systemd", "systemdsystemunitdir")
        #expect(!dbusServices.isEmpty && !units.isEmpty)
        // WirePlumber's data directory: that of the WirePlumber installed here, which
        // reads drop-ins beside its own access configuration there (no other share/).
        var wireplumberPrefix = try Installing.pkgconfig("wireplumber-0.5", "prefix")
        if wireplumberPrefix.isEmpty { wireplumberPrefix = try Installing.pkgconfig("wireplumber-0.4", "prefix") }
        let wireplumber = (wireplumberPrefix.isEmpty ? "/usr" : wireplumberPrefix) + "/share/wireplumber"
        #expect(FileManager.default.fileExists(atPath: wireplumber + "/main.lua.d/50-default-access-config.lua"),
                "no WirePlumber 0.4 configuration in \(wireplumber) (scripts/install-deps installs wireplumber)")

        let plugins = ["location", "notifications", "pipewire", "bluetooth", "local-network"]
        var expected: Set<String> = [
            "/usr/libexec/permissionsd",
            "/usr/libexec/permissionsd-connector",
            "/usr/bin/permissionsctl",
            "/usr/include/permissions/permissions-plugin.h",
            "/usr/lib/pkgconfig/permissions-plugin.pc",
            "/usr/share/permissions/plugin.map",
            "/usr/share/permissions/install-manifest",
            dbusPolicy + "/org.example.Permissions.conf",
            dbusServices + "/org.example.Permissions.service",
            "/usr/share/dbus-1/interfaces/org.example.Permissions.xml",
            "/usr/share/dbus-1/interfaces/org.example.Permissions.Agent.xml",
            polkit + "/org.example.Permissions.policy",
            units + "/permissionsd.service",
            units + "/permissionsd-connector.service",
            units + "/permissionsd-connector.socket",
            "/usr/share/man/man8/permissionsd.8",
            "/usr/share/man/man8/permissionsd-connector.8",
            "/usr/share/man/man1/permissionsctl.1",
            "/usr/share/man/man5/permissions.conf.5",
            "/usr/share/bash-completion/completions/permissionsctl",
            wireplumber + "/main.lua.d/60-org.example.Permissions-access.lua",
            wireplumber + "/wireplumber.conf.d/90-org.example.Permissions-access.conf",
            "/etc/permissions/permissions.conf",
            // The desktop's agent, its desktop file and its autostart entry.
            "/usr/libexec/permissions-prompt",
            "/usr/share/man/man1/permissions-prompt.1",
            "/usr/share/applications/org.example.Permissions.Prompt.desktop",
            "/etc/xdg/autostart/org.example.Permissions.Prompt.desktop",
            // The privacy page: its desktop file, session activation file and icon.
            "/usr/bin/permissions-settings",
            "/usr/share/man/man1/permissions-settings.1",
            "/usr/share/applications/org.example.Permissions.Settings.desktop",
            "/usr/share/dbus-1/services/org.example.Permissions.Settings.service",
            "/usr/share/icons/hicolor/scalable/apps/org.example.Permissions.Settings.svg",
        ]
        for plugin in plugins { expected.insert("/usr/lib/permissions/plugins/libpermissions-\(plugin).so") }
        let found = Installing.files(under: stage)
        // The rest is the bundled Swift runtime, next to the plugin directory.
        let runtime = found.subtracting(expected)
        #expect(runtime.contains("/usr/lib/permissions/libswiftCore.so"), "\(found.sorted())")
        #expect(runtime.allSatisfy { $0.hasPrefix("/usr/lib/permissions/lib") && $0.hasSuffix(".so") && !$0.dropFirst(21).contains("/") },
                "files outside their places: \(runtime.sorted())")
        #expect(expected.subtracting(found).sorted() == [], "missing")

        // The manifest lists every file but the configuration and itself.
        let manifest = try String(contentsOfFile: stage + "/usr/share/permissions/install-manifest", encoding: .utf8)
        let listed = Set(manifest.split(separator: "\n").filter { $0.hasPrefix("f ") }.map { String($0.dropFirst(2)) })
        #expect(listed == found.subtracting(["/etc/permissions/permissions.conf", "/usr/share/permissions/install-manifest"]))

        // Paths written into the files are those of the prefix, not of the stage.
        let activation = try String(contentsOfFile: stage + dbusServices + "/org.example.Permissions.service", encoding: .utf8)
        #expect(activation.contains("\nExec=/usr/libexec/permissionsd\n"), "\(activation)")
        #expect(activation.contains("\nSystemdService=permissionsd.service\n"))
        let unit = try String(contentsOfFile: stage + units + "/permissionsd.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=/usr/libexec/permissionsd --system\n"))
        #expect(unit.contains("\nStateDirectory=permissions\n"))
        #expect(unit.contains("\nWants=permissionsd-connector.socket\n") && unit.contains("\nAfter=permissionsd-connector.socket\n"))
        let connectorUnit = try String(contentsOfFile: stage + units + "/permissionsd-connector.service", encoding: .utf8)
        #expect(connectorUnit.contains("\nExecStart=/usr/libexec/permissionsd-connector\n"), "\(connectorUnit)")
        // The connector's socket is where the daemon looks for it by default.
        let socketUnit = try String(contentsOfFile: stage + units + "/permissionsd-connector.socket", encoding: .utf8)
        let daemonHelp = try run(stage + "/usr/libexec/permissionsd", ["--help"]).stdout
        let listen = try #require(socketUnit.split(separator: "\n").first { $0.hasPrefix("ListenSequentialPacket=") })
        let path = listen.dropFirst("ListenSequentialPacket=".count)
        #expect(daemonHelp.contains("(default \(path) on the"), "\(daemonHelp)")
        #expect(socketUnit.contains("\nSocketMode=0600\n") && socketUnit.contains("\nSocketUser=root\n"))
        let pc = try String(contentsOfFile: stage + "/usr/lib/pkgconfig/permissions-plugin.pc", encoding: .utf8)
        #expect(pc.contains("\nprefix=/usr\n") && pc.contains("pluginsdir=${prefix}/lib/permissions/plugins"))
        // The agent's entries name the installed agent, hidden from menus; the
        // autostart entry is the same file.
        let promptEntry = try String(contentsOfFile: stage + "/usr/share/applications/org.example.Permissions.Prompt.desktop",
                                     encoding: .utf8)
        #expect(promptEntry.contains("\nExec=/usr/libexec/permissions-prompt\n"), "\(promptEntry)")
        #expect(promptEntry.contains("\nNoDisplay=true\n") && !promptEntry.contains("@"), "\(promptEntry)")
        #expect(try String(contentsOfFile: stage + "/etc/xdg/autostart/org.example.Permissions.Prompt.desktop",
                           encoding: .utf8) == promptEntry)
        // The page's entries name the installed program; D-Bus starts it as a
        // GApplication service.
        let settingsEntry = try String(contentsOfFile: stage
                                       + "/usr/share/applications/org.example.Permissions.Settings.desktop",
                                       encoding: .utf8)
        #expect(settingsEntry.contains("\nExec=/usr/bin/permissions-settings\n")
                && settingsEntry.contains("\nDBusActivatable=true\n") && !settingsEntry.contains("@"), "\(settingsEntry)")
        let settingsService = try String(contentsOfFile: stage
                                         + "/usr/share/dbus-1/services/org.example.Permissions.Settings.service",
                                         encoding: .utf8)
        #expect(settingsService.contains("\nName=org.example.Permissions.Settings\n")
                && settingsService.contains("\nExec=/usr/bin/permissions-settings --gapplication-service\n"),
                "\(settingsService)")
        #expect(!(manifest + activation + unit + connectorUnit + pc + promptEntry + settingsEntry + settingsService)
                    .contains(stage))

        // The units, as hardened as systemd's own bus services, or more.
        for name in ["permissionsd.service", "permissionsd-connector.service"] {
            let figure = try Installing.exposure(of: stage + units + "/" + name)
            #expect(figure <= 2.0, "systemd-analyze security rates \(name) \(figure)")
        }

        // The man pages render without a warning, and name the package version.
        let packageVersion = try run(stage + "/usr/libexec/permissionsd", ["--version"]).stdout
            .split(separator: "\n").first?.split(separator: " ").last.map(String.init) ?? "?"
        for page in ["man8/permissionsd.8", "man8/permissionsd-connector.8", "man1/permissionsctl.1",
                     "man5/permissions.conf.5", "man1/permissions-prompt.1", "man1/permissions-settings.1"] {
            let lint = try run("/usr/bin/groff", ["-man", "-ww", "-z", stage + "/usr/share/man/" + page])
            #expect(lint.status == 0 && lint.stderr.isEmpty, "\(page): \(lint.stderr)")
            let text = try String(contentsOfFile: stage + "/usr/share/man/" + page, encoding: .utf8)
            #expect(text.contains(" \"permissions \(packageVersion)\" "), "\(page)")
        }

        // No installed ELF file names the toolchain; with the toolchain hidden, the
        // daemon runs and loads every Swift plugin (each needs the runtime, and the
        // pipewire and bluetooth ones a library the daemon itself does not load).
        for file in found where file.hasSuffix(".so") || file.hasPrefix("/usr/libexec/") || file.hasSuffix("/permissionsctl") {
            let dynamic = try run("/usr/bin/readelf", ["-d", stage + file]).stdout
            #expect(!dynamic.contains(Installing.toolchainDir), "\(file): \(dynamic)")
        }
        let config = try makeTemporaryDirectory("install-config")
        defer { try? FileManager.default.removeItem(atPath: config) }
        // A section for every permission of every plugin: --check-config passes only
        // if a loaded plugin provides each (see CheckConfigTests).
        let sections = ["location", "notifications", "camera", "microphone", "bluetooth", "local-network"]
        try sections.map { "[\($0)]\nenabled=true\n" }.joined()
            .write(toFile: config + "/permissions.conf", atomically: true, encoding: .utf8)
        let check = try Installing.runWithoutToolchain([stage + "/usr/libexec/permissionsd", "--check-config",
                                                  "--config-dir", config,
                                                  "--plugin-dir", stage + "/usr/lib/permissions/plugins"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("\(config): configuration OK"))
        #expect(check.stderr == "", "\(check.stderr)")
        let version = try Installing.runWithoutToolchain([stage + "/usr/bin/permissionsctl", "--version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("permissionsctl "), "\(version.stderr)")
        let connectorVersion = try Installing.runWithoutToolchain([stage + "/usr/libexec/permissionsd-connector",
                                                                   "--version"])
        #expect(connectorVersion.status == 0 && connectorVersion.stdout.hasPrefix("permissionsd-connector "),
                "\(connectorVersion.stderr)")
        // The agent too (GTK is the machine's; the Swift runtime the install's).
        let promptVersion = try Installing.runWithoutToolchain([stage + "/usr/libexec/permissions-prompt", "--version"])
        #expect(promptVersion.status == 0 && promptVersion.stdout.hasPrefix("permissions-prompt "),
                "\(promptVersion.stderr)")
        #expect(promptVersion.stdout.split(separator: "\n").first?.dropFirst("permissions-prompt ".count)
                    == packageVersion[...])
        let promptHelp = try Installing.runWithoutToolchain([stage + "/usr/libexec/permissions-prompt", "--help"])
        #expect(promptHelp.status == 0 && promptHelp.stdout.hasPrefix("Usage: permissions-prompt "),
                "\(promptHelp.stderr)")
        let settingsHelp = try Installing.runWithoutToolchain([stage + "/usr/bin/permissions-settings", "--help"])
        #expect(settingsHelp.status == 0 && settingsHelp.stdout.hasPrefix("Usage: permissions-settings "),
                "\(settingsHelp.stderr)")

        // The daemon and the client load nothing of GTK, installed with the desktop or
        // not; the agent does (the control: the check finds GTK where it is).
        let promptLibraries = try Installing.gtkLibraries(of: stage + "/usr/libexec/permissions-prompt")
        #expect(promptLibraries.contains { $0.hasPrefix("libgtk-4.so") } && promptLibraries.contains { $0.hasPrefix("libadwaita-1.so") },
                "\(promptLibraries)")
        for program in ["/usr/libexec/permissionsd", "/usr/bin/permissionsctl"] {
            #expect(try Installing.gtkLibraries(of: stage + program) == [], "\(program)")
        }
    }

    /// A server's install: no desktop program, desktop file or autostart entry, and
    /// nothing of GTK loaded by what is installed.
    @Test func noDesktopInstallLeavesTheDesktopOut() throws {
        let stage = try makeTemporaryDirectory("install-server")
        defer { try? FileManager.default.removeItem(atPath: stage) }
        try Installing.install(["--destdir", stage, "--prefix", "/usr", "--no-desktop"])
        let found = Installing.files(under: stage)
        #expect(found.contains("/usr/libexec/permissionsd") && found.contains("/usr/bin/permissionsctl"))
        let desktop = found.filter { $0.contains("permissions-prompt") || $0.contains("permissions-settings")
                                     || $0.contains("Permissions.Settings") || $0.hasSuffix(".desktop") }
        #expect(desktop.sorted() == [], "installed with --no-desktop")
        #expect(!FileManager.default.fileExists(atPath: stage + "/usr/share/applications"))
        #expect(!FileManager.default.fileExists(atPath: stage + "/etc/xdg"))
        for file in found where file.hasSuffix(".so") || file.hasPrefix("/usr/libexec/") || file.hasPrefix("/usr/bin/") {
            #expect(try Installing.gtkLibraries(of: stage + file) == [], "\(file)")
        }
        // An existing build without the desktop's, and no --no-desktop: refused, as
        // scripts/install cannot tell whether to build the desktop or to leave it out.
        let releaseDir = try #require(Installing.releaseDir)
        let refused = try run(packageRoot + "/scripts/install", ["--destdir", stage, "--build-dir", releaseDir])
        #expect(refused.status == 2 && refused.stderr.contains("--desktop-build-dir"), "\(refused.stderr)")
    }

    // MARK: An install whose paths are real

    @Test func installedServiceIsActivatedServedExtendedAndUninstalled() throws {
        // Resolved: compared with what /proc shows.
        let (root, flags) = try Installing.installWithRealPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let daemonPath = root + "/usr/libexec/permissionsd"
        let ctl = root + "/usr/bin/permissionsctl"

        // The installed unit names the installed daemon; systemd-analyze verify finds
        // nothing to say (its man pages are found where they were installed).
        let unit = root + "/systemd/permissionsd.service"
        let connectorUnit = root + "/systemd/permissionsd-connector.service"
        var manEnvironment = ProcessInfo.processInfo.environment
        manEnvironment["MANPATH"] = root + "/usr/share/man"
        let verify = try run("/usr/bin/systemd-analyze", ["verify", unit, connectorUnit,
                                                          root + "/systemd/permissionsd-connector.socket"],
                             environment: manEnvironment)
        #expect(verify.status == 0 && verify.stdout.isEmpty && verify.stderr.isEmpty, "\(verify.stdout) \(verify.stderr)")
        #expect(try String(contentsOfFile: unit, encoding: .utf8).contains("\nExecStart=\(daemonPath) --system\n"))
        #expect(try String(contentsOfFile: connectorUnit, encoding: .utf8)
                    .contains("\nExecStart=\(root)/usr/libexec/permissionsd-connector\n"))
        #expect(try Installing.exposure(of: unit) <= 2.0)
        #expect(try Installing.exposure(of: connectorUnit) <= 2.0)

        // Its compiled-in defaults are the installed directories: with no option,
        // --check-config reads SYSCONFDIR/permissions/permissions.conf.
        let check = try run(daemonPath, ["--check-config"])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.contains("\(root)/etc/permissions: configuration OK (\(root)/etc/permissions/permissions.conf)"),
                "\(check.stdout)")

        // Nobody starts the daemon: a call activates it.
        let bus = try InstalledBus(type: "system", policy: root + "/dbus/system.d/org.example.Permissions.conf",
                                         services: root + "/dbus/system-services")
        let busctl = { (arguments: [String], asNobody: Bool) throws -> CommandResult in
            try run("/usr/bin/busctl", ["--address=\(bus.address)"] + arguments, asNobody: asNobody)
        }
        let call = { (method: String, arguments: [String], asNobody: Bool) throws -> CommandResult in
            try busctl(["call", "org.example.Permissions", "/org/example/Permissions", "org.example.Permissions", method]
                       + arguments, asNobody)
        }
        let first = try call("GetStatus", ["s", "location"], false)
        #expect(first.status == 0 && first.stdout == "s \"not-determined\"\n", "\(first.stderr) \(bus.log)")
        #expect(bus.log.contains("Activating service name='org.example.Permissions'"), "\(bus.log)")
        let pidReply = try busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "GetConnectionUnixProcessID", "s", "org.example.Permissions"], false)
        let pid = try #require(Int32(pidReply.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines)),
                               "\(pidReply.stdout) \(pidReply.stderr)")
        // The activated process is the installed daemon, and its runtime is the
        // installed one (the toolchain is hidden from it anyway).
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") == daemonPath)
        let maps = try run("/bin/cat", ["/proc/\(pid)/maps"]).stdout  // (Foundation reads /proc files short)
        #expect(maps.contains(root + "/usr/lib/permissions/libswiftCore.so"), "\(maps)")
        #expect(!maps.contains(Installing.toolchainDir + "/"))
        #expect(bus.log.contains("store \(root)/var/lib/permissions/decisions.sqlite"), "\(bus.log)")

        // The installed policy: someone else cannot own the name, but can call the
        // service and hear what it broadcasts.
        let own = try busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                              "RequestName", "su", "org.example.Permissions", "4"], true)
        #expect(own.status != 0 && own.stderr.contains("Access denied"), "\(own.stdout) \(own.stderr)")
        let nobodyCall = try call("GetStatus", ["s", "notifications"], true)
        #expect(nobodyCall.status == 0 && nobodyCall.stdout == "s \"not-determined\"\n", "\(nobodyCall.stderr)")
        let monitor = Process()
        monitor.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        monitor.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", ctl, "--address", bus.address, "monitor"]
        let monitorOut = Pipe()
        monitor.standardOutput = monitorOut
        monitor.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try monitor.run()
        defer {
            kill(monitor.processIdentifier, SIGKILL)
            monitor.waitUntilExit()
        }
        let heard = LineCollector(monitorOut.fileHandleForReading)
        try heard.next { $0.hasPrefix("Monitoring") }

        // A plugin built with nothing but the installed SDK (its .pc file), dropped
        // into the installed plugin directory by its own `make install`: the
        // running daemon serves it, and nobody hears about it.
        let example = try makeTemporaryDirectory("install-example")
        defer { try? FileManager.default.removeItem(atPath: example) }
        for file in ["Makefile", "example-lan.c"] {
            try FileManager.default.copyItem(atPath: packageRoot + "/Plugins/Example/" + file, toPath: example + "/" + file)
        }
        var sdk = ProcessInfo.processInfo.environment
        sdk["PKG_CONFIG_PATH"] = root + "/usr/lib/pkgconfig"
        sdk["PKG_CONFIG_LIBDIR"] = root + "/usr/lib/pkgconfig"
        let make = try run("/usr/bin/make", ["-s", "-C", example, "install"], environment: sdk)
        #expect(make.status == 0, "make: \(make.stdout) \(make.stderr)")
        let plugin = root + "/usr/lib/permissions/plugins/libpermissions-example-lan.so"
        #expect(FileManager.default.fileExists(atPath: plugin))
        try heard.next { $0.hasPrefix("StatusChanged app=* permission=example-lan status=not-determined") }
        try heard.next { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 1.0 loaded") }
        #expect(try call("GetStatus", ["s", "example-lan"], true).stdout == "s \"not-determined\"\n")

        // --version: the package version of both programs, and the interface version
        // the running service announces.
        let interface = try busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                    "org.example.Permissions", "version"], false).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(interface.hasPrefix("u "), "\(interface)")
        let ctlVersion = try run(ctl, ["--version"])
        let daemonVersion = try run(daemonPath, ["--version"])
        #expect(ctlVersion.status == 0 && daemonVersion.status == 0)
        let ctlLines = ctlVersion.stdout.split(separator: "\n")
        let daemonLines = daemonVersion.stdout.split(separator: "\n")
        #expect(ctlLines.first?.hasPrefix("permissionsctl ") == true, "\(ctlVersion.stdout)")
        #expect(ctlLines.first?.dropFirst("permissionsctl ".count) == daemonLines.first?.dropFirst("permissionsd ".count))
        #expect(ctlLines.last == "org.example.Permissions interface version \(interface.dropFirst(2))", "\(ctlVersion.stdout)")
        #expect(daemonLines.last == ctlLines.last)

        // Stopped (SIGTERM, as systemd would) and upgraded: installed again with the
        // same flags. The administrator's configuration stays as edited, the manifest
        // lists the same, and the new daemon, activated by the next call, has the
        // decisions of the old one.
        #expect(try run(ctl, ["--address", bus.address, "grant", "org.example.Kept", "location"]).status == 0)
        Installing.stop(pid)
        #expect(bus.log.contains("stopping"), "\(bus.log)")
        let configPath = root + "/etc/permissions/permissions.conf"
        let edited = try String(contentsOfFile: configPath, encoding: .utf8) + "# edited by the administrator\n"
        try edited.write(toFile: configPath, atomically: true, encoding: .utf8)
        let manifestPath = root + "/usr/share/permissions/install-manifest"
        let manifestBefore = try String(contentsOfFile: manifestPath, encoding: .utf8)
        try Installing.install(flags)
        #expect(try String(contentsOfFile: configPath, encoding: .utf8) == edited)
        #expect(try String(contentsOfFile: manifestPath, encoding: .utf8).split(separator: "\n").sorted()
                == manifestBefore.split(separator: "\n").sorted())
        let kept = try run(ctl, ["--address", bus.address, "list"])
        #expect(kept.status == 0 && kept.stdout.contains("org.example.Kept"), "\(kept.stdout) \(kept.stderr)")
        let upgraded = try busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "GetConnectionUnixProcessID", "s", "org.example.Permissions"], false)
        let upgradedPID = try #require(Int32(upgraded.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(upgradedPID != pid)
        Installing.stop(upgradedPID)

        // The agent starts with every graphical session, as installed.
        let autostart = try String(contentsOfFile: root + "/etc/xdg/autostart/org.example.Permissions.Prompt.desktop",
                                   encoding: .utf8)
        #expect(autostart.contains("\nExec=\(root)/usr/libexec/permissions-prompt\n"), "\(autostart)")

        // Uninstalled: nothing installed is left, only the configuration and the
        // decisions, and the plugin the administrator (this test) added, which the
        // test removes itself.
        try FileManager.default.removeItem(atPath: plugin)
        try Installing.install(flags, script: "uninstall")
        let left = Installing.files(under: root)
        #expect(left.contains("/etc/permissions/permissions.conf"))
        #expect(left.contains("/var/lib/permissions/decisions.sqlite"))
        let unexpected = left.filter { !$0.hasPrefix("/etc/permissions/") && !$0.hasPrefix("/var/lib/permissions/") }
        #expect(unexpected.sorted() == [], "left behind")
        let directories = try FileManager.default.contentsOfDirectory(atPath: root).sorted()
        #expect(directories == ["etc", "var"], "directories left behind")
    }

    /// The activation file's Exec= names no bus: the daemon serves the bus that
    /// started it, as DBUS_STARTER_ADDRESS and DBUS_STARTER_BUS_TYPE say, whatever
    /// bus its environment otherwise names: a session bus as a session bus (state
    /// in XDG_STATE_HOME), a bus of no standard type by its address.
    @Test(arguments: ["session", nil] as [String?])
    func activatedItServesTheBusThatStartedIt(type: String?) throws {
        let (root, _) = try Installing.installWithRealPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let stateHome = root + "/state-home"
        // The system bus and session bus that the environment names go nowhere: a
        // daemon that took its bus from them would fail, and activation with it.
        let bus = try InstalledBus(type: type, services: root + "/dbus/system-services",
                                   environment: ["XDG_STATE_HOME": stateHome,
                                                 "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(root)/no-system-bus",
                                                 "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(root)/no-session-bus"])
        let reply = try run("/usr/bin/busctl", ["--address=\(bus.address)", "--timeout=20", "call", "org.example.Permissions",
                                                "/org/example/Permissions", "org.example.Permissions", "GetStatus", "s", "location"])
        #expect(reply.status == 0 && reply.stdout == "s \"not-determined\"\n", "\(reply.stderr) \(bus.log)")
        #expect(bus.log.contains("store \(stateHome)/permissions/decisions.sqlite"), "\(bus.log)")
        let pidReply = try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.freedesktop.DBus",
                                                   "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                   "GetConnectionUnixProcessID", "s", "org.example.Permissions"])
        if let pid = Int32(pidReply.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines)) {
            Installing.stop(pid)  // before its state directory goes
        }
    }
}
