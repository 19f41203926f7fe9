import Foundation
import Testing
import PermissionsTestSupport

/// The PipeWire plugin against a real PipeWire daemon: camera and microphone
/// follow Video/Source and Audio/Source nodes, with exactly one StatusChanged per
/// transition, whatever the order in which PipeWire and permissionsd start, stop
/// or hang. Each test has its own PipeWire, bus and daemon.
@Suite struct PipeWireTests {
    let cameraOn = statusLine(app: "", "camera", "not-determined")
    let cameraOff = statusLine(app: "", "camera", "unsupported")
    let micOn = statusLine(app: "", "microphone", "not-determined")
    let micOff = statusLine(app: "", "microphone", "unsupported")

    func only(_ permission: String, _ lines: [String]) -> [String] {
        lines.filter { $0.contains(" permission=\(permission) ") }
    }

    @Test func camerasComeAndGoWithOneSignalPerTransition() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire())
        #expect(try rig.status("camera") == "s \"unsupported\"")
        #expect(try rig.status("microphone") == "s \"unsupported\"")
        #expect(try rig.deviceNames("camera") == [])

        try rig.pipewire.addCamera("cam1")
        try rig.waitFor(cameraOn)
        #expect(try rig.newSignals() == [cameraOn])
        #expect(try rig.status("camera") == "s \"not-determined\"")
        #expect(try rig.status("microphone") == "s \"unsupported\"")
        let details = try rig.details("camera")
        #expect(details.contains("  - name=cam1 description=Fake Camera cam1 serial="), "\(details)")
        #expect(details.contains("media-class=Video/Source"), "\(details)")
        #expect(details.contains("plugin-details: pipewire=connected"), "\(details)")

        // A second camera is not a transition; the list grows, oldest first.
        try rig.pipewire.addCamera("cam2")
        try rig.flushPipeWire(marker: "microphone")
        #expect(only("camera", try rig.newSignals()) == [])
        #expect(try rig.deviceNames("camera") == ["cam1", "cam2"])

        // Neither is losing one of two.
        try rig.pipewire.removeNode("cam1")
        try rig.flushPipeWire(marker: "microphone")
        #expect(only("camera", try rig.newSignals()) == [])
        #expect(try rig.deviceNames("camera") == ["cam2"])
        #expect(try rig.status("camera") == "s \"not-determined\"")

        try rig.pipewire.removeNode("cam2")
        try rig.waitFor(cameraOff)
        #expect(try rig.newSignals() == [cameraOff])
        #expect(try rig.deviceNames("camera") == [])

        // PipeWire gives the next node the id just freed: a remove and an add of the
        // same id are two transitions, and the list shows only the new node.
        try rig.pipewire.addCamera("cam3")
        try rig.waitFor(cameraOn)
        #expect(try rig.newSignals() == [cameraOn])
        #expect(try rig.deviceNames("camera") == ["cam3"])
        try rig.pipewire.removeNode("cam3")
        try rig.waitFor(cameraOff)
        #expect(try rig.newSignals() == [cameraOff])
        #expect(try rig.status("camera") == "s \"unsupported\"")
    }

    @Test func microphonesIncludingVirtualSourcesComeAndGo() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire())
        try rig.pipewire.addMicrophone("mic1")
        try rig.waitFor(micOn)
        #expect(try rig.newSignals() == [micOn])
        #expect(try rig.status("microphone") == "s \"not-determined\"")
        #expect(try rig.status("camera") == "s \"unsupported\"")

        try rig.pipewire.addMicrophone("vmic", mediaClass: "Audio/Source/Virtual")
        try rig.flushPipeWire(marker: "camera")
        #expect(only("microphone", try rig.newSignals()) == [])
        #expect(try rig.deviceNames("microphone") == ["mic1", "vmic"])
        #expect(try rig.details("microphone").contains("media-class=Audio/Source/Virtual"))

        try rig.pipewire.removeNode("mic1")
        try rig.flushPipeWire(marker: "camera")
        #expect(only("microphone", try rig.newSignals()) == [])
        #expect(try rig.status("microphone") == "s \"not-determined\"")  // the virtual source alone counts

        try rig.pipewire.removeNode("vmic")
        try rig.waitFor(micOff)
        #expect(try rig.newSignals() == [micOff])
    }

    @Test func sinksAndOtherNodesAreNotDevices() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire())
        try rig.pipewire.addAudioNode("speaker", mediaClass: "Audio/Sink")
        try rig.pipewire.addAudioNode("monitor-ish", mediaClass: "Audio/Duplex")
        try rig.pipewire.addAudioNode("stream", mediaClass: "Stream/Input/Audio")
        try rig.flushPipeWire(marker: "camera")
        try rig.flushPipeWire(marker: "microphone")
        let seen = try rig.newSignals()
        #expect(seen == [cameraOn, cameraOff, micOn, micOff], "only the markers' own signals")
        #expect(try rig.status("microphone") == "s \"unsupported\"")
        #expect(try rig.deviceNames("microphone") == [])
    }

    @Test func fiftyAddRemoveCyclesGiveExactlyOneSignalPerTransition() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire())
        _ = try rig.newSignals()
        // Each transition is waited for: the host may coalesce publications that
        // outrun it, so only then is "one signal per transition" well defined. The
        // next node takes the id just freed, every time.
        for i in 1...50 {
            try rig.pipewire.addCamera("cam\(i)")
            try rig.waitFor(cameraOn, count: i)
            try rig.pipewire.addMicrophone("mic\(i)")
            try rig.waitFor(micOn, count: i)
            try rig.pipewire.removeNode("cam\(i)")
            try rig.waitFor(cameraOff, count: i)
            try rig.pipewire.removeNode("mic\(i)")
            try rig.waitFor(micOff, count: i)
        }
        let seen = try rig.newSignals()
        #expect(seen == Array(repeating: [cameraOn, micOn, cameraOff, micOff], count: 50).flatMap { $0 })
        #expect(try rig.status("camera") == "s \"unsupported\"")
        #expect(try rig.status("microphone") == "s \"unsupported\"")
        #expect(try rig.deviceNames("camera") == [])
    }

    @Test func fiftyCyclesWithoutWaitingEndRightAndNeverRepeatAStatus() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire())
        _ = try rig.newSignals()
        for i in 1...50 {
            try rig.pipewire.addCamera("cam\(i)")
            try rig.pipewire.addMicrophone("mic\(i)")
            try rig.pipewire.removeNode("cam\(i)")
            try rig.pipewire.removeNode("mic\(i)")
        }
        try rig.pipewire.addCamera("last")
        try rig.pipewire.addMicrophone("last-mic")
        // Coalesced publications mean no single signal marks the end of the burst;
        // the device lists of the applied snapshots do.
        try rig.poll("the final devices") {
            try rig.deviceNames("camera") == ["last"] && rig.deviceNames("microphone") == ["last-mic"]
        }
        let seen = try rig.newSignals()
        // Publications that outran the daemon may be coalesced, but no signal is ever
        // repeated or lost: from unsupported to not-determined, alternating.
        for (permission, on, off) in [("camera", cameraOn, cameraOff), ("microphone", micOn, micOff)] {
            let lines = only(permission, seen)
            #expect(lines.first == on && lines.last == on, "\(lines)")
            #expect(zip(lines, lines.dropFirst()).allSatisfy { $0 != $1 }, "\(lines)")
            #expect(Set(lines).isSubset(of: [on, off]) && lines.count <= 101, "\(lines)")
        }
        #expect(try rig.status("camera") == "s \"not-determined\"")
        #expect(try rig.status("microphone") == "s \"not-determined\"")
    }

    /// A PipeWire client in C that creates and destroys camera nodes as fast as
    /// PipeWire takes them, then leaves one ("survivor") and prints DONE.
    static let churnClient = """
        #include <pipewire/pipewire.h>
        #include <stdio.h>
        #include <stdlib.h>
        static struct pw_main_loop *loop;
        static int done_seq;
        static void on_done(void *d, uint32_t id, int seq) {
            (void)d; if (id == PW_ID_CORE && seq == done_seq) pw_main_loop_quit(loop);
        }
        static const struct pw_core_events core_events = { PW_VERSION_CORE_EVENTS, .done = on_done };
        static void roundtrip(struct pw_core *core) {
            done_seq = pw_core_sync(core, PW_ID_CORE, 0);
            pw_main_loop_run(loop);
        }
        int main(int argc, char **argv) {
            int n = atoi(argv[1]);
            pw_init(&argc, &argv);
            loop = pw_main_loop_new(NULL);
            struct pw_context *ctx = pw_context_new(pw_main_loop_get_loop(loop), NULL, 0);
            struct pw_core *core = pw_context_connect(ctx, NULL, 0);
            if (!core) { perror("pw_context_connect"); return 1; }
            struct spa_hook listener; spa_zero(listener);
            pw_core_add_listener(core, &listener, &core_events, NULL);
            struct pw_properties *churn = pw_properties_new_string(
                "factory.name=videotestsrc node.name=churn media.class=Video/Source");
            for (int i = 0; i < n; i++) {
                struct pw_proxy *node = pw_core_create_object(core, "adapter", PW_TYPE_INTERFACE_Node,
                                                              PW_VERSION_NODE, &churn->dict, 0);
                if (i % 50 == 0) roundtrip(core);  /* keep PipeWire's queue for us bounded */
                pw_proxy_destroy(node);
            }
            struct pw_properties *last = pw_properties_new_string(
                "factory.name=videotestsrc node.name=survivor media.class=Video/Source object.linger=true");
            pw_core_create_object(core, "adapter", PW_TYPE_INTERFACE_Node, PW_VERSION_NODE, &last->dict, 0);
            roundtrip(core);
            printf("DONE\\n");
            return 0;
        }
        """

    @Test func nodeChurnStormKeepsThePluginServing() throws {
        let pipewire = try TestPipeWire()
        let rig = try PipeWireRig(pipewire: pipewire)
        let dir = try makeTemporaryDirectory("churn")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.churnClient.write(toFile: dir + "/churn.c", atomically: true, encoding: .utf8)
        let flags = try run("/usr/bin/pkg-config", ["--cflags", "--libs", "libpipewire-0.3"]).stdout
            .split(whereSeparator: \.isWhitespace).map(String.init)
        let cc = try run("/usr/bin/cc", ["-O2", "-o", dir + "/churn", dir + "/churn.c"] + flags)
        try #require(cc.status == 0, "cc: \(cc.stderr)")
        _ = try rig.newSignals()

        // Thousands of node events a second: far above the host's flood limit of
        // 1000 publications a second, which would make the plugin unavailable.
        var environment = environmentWithoutPipeWire()
        environment["XDG_RUNTIME_DIR"] = pipewire.runtimeDirectory
        let churn = try run(dir + "/churn", ["3000"], environment: environment)
        #expect(churn.stdout == "DONE\n", "\(churn.stderr)")

        try rig.poll("the survivor listed") { try rig.deviceNames("camera") == ["survivor"] }
        let plugins = try rig.daemon.ctl("plugins").stdout
        #expect(plugins.contains { $0 == "\n" } && plugins.split(separator: "\n").contains {
            $0.hasPrefix("pipewire ") && $0.contains(" loaded ")
        }, "\(plugins)")
        #expect(try rig.status("camera") == "s \"not-determined\"")
        let lines = only("camera", try rig.newSignals())
        #expect(lines.last == cameraOn && zip(lines, lines.dropFirst()).allSatisfy { $0 != $1 }, "\(lines)")
        #expect(!rig.daemon.log.contains("unavailable"), "\(rig.daemon.log)")
    }

    @Test func configurationSwitchesAndLocksCameraAndMicrophone() throws {
        let pipewire = try TestPipeWire()
        try pipewire.addCamera("cam1")
        let rig = try PipeWireRig(pipewire: pipewire, startDaemon: false)
        try rig.daemon.writeConfig("""
            [notifications]
            enabled=true
            [camera]
            enabled=false
            [microphone]
            deny=org.example.Spy
            allow=org.example.Call
            """)
        try rig.startDaemon()
        // A camera present but switched off: "disabled" from the first answer, or after
        // one signal, never an "available" first. Which one depends on whether the
        // plugin's first registry listing comes before the name is owned (a state taken
        // then is told to nobody: no client could have asked yet) or after.
        try rig.poll("camera disabled") { try rig.status("camera") == "s \"disabled\"" }
        let first = try rig.newSignals()
        #expect(first == [] || first == [statusLine(app: "", "camera", "disabled")], "\(first)")
        #expect(try rig.deviceNames("camera") == ["cam1"])
        // No microphone: unsupported for every app, locks included.
        #expect(try rig.daemon.call("GetStatusForApp", "ss", "org.example.Spy", "microphone").stdout
                == "s \"unsupported\"\n")

        try pipewire.addMicrophone("mic1")
        try rig.waitFor(micOn)
        #expect(only("microphone", try rig.newSignals()).first == micOn)
        #expect(try rig.daemon.call("GetStatusForApp", "ss", "org.example.Spy", "microphone").stdout
                == "s \"restricted\"\n")
        #expect(try rig.daemon.call("GetStatusForApp", "ss", "org.example.Call", "microphone").stdout
                == "s \"authorized\"\n")

        // Edits apply at once; a bad value keeps the last good configuration.
        try rig.daemon.writeConfig("[notifications]\nenabled=true\n[camera]\nenabled=maybe\n")
        try rig.poll("the bad value reported") {
            rig.daemon.log.contains("[camera] enabled=maybe: expected true or false; keeping the last good")
        }
        #expect(try rig.status("camera") == "s \"disabled\"")
        // (No fence while the configuration is kept: the fence is an edit of it.)
        try rig.daemon.writeConfig("[notifications]\nenabled=true\n")
        try rig.waitFor(cameraOn)
        let seen = try rig.newSignals()
        // The bad value sent nothing: the one camera change is the switch back on.
        #expect(only("camera", seen) == [cameraOn])
        #expect(try rig.status("camera") == "s \"not-determined\"")
        #expect(try rig.daemon.call("GetStatusForApp", "ss", "org.example.Spy", "microphone").stdout
                == "s \"not-determined\"\n")
    }

    @Test func pipewireKilledAndRestartedIsFollowed() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire())
        try rig.pipewire.addCamera("cam1")
        try rig.pipewire.addMicrophone("mic1")
        try rig.waitFor(cameraOn)
        try rig.waitFor(micOn)
        // One signal each; in which order is the host's (it applies what arrived together as one batch).
        let first = try rig.newSignals()
        #expect(first.count == 2 && Set(first) == [cameraOn, micOn], "\(first)")

        // Gone: unsupported at once, one signal each, and said why.
        rig.pipewire.kill()
        try rig.waitFor(cameraOff)
        try rig.waitFor(micOff)
        let gone = try rig.newSignals()
        #expect(gone.count == 2 && Set(gone) == [cameraOff, micOff], "\(gone)")
        #expect(try rig.status("camera") == "s \"unsupported\"")
        #expect(try rig.connectionState() == "unreachable")
        #expect(try rig.deviceNames("camera") == [])
        #expect(rig.daemon.log.contains("lost the connection to PipeWire"), "\(rig.daemon.log)")

        // Back, empty (the nodes died with it): the plugin reconnects within its
        // backoff, and the new PipeWire's nodes are followed.
        try rig.pipewire.start()
        try rig.pipewire.addCamera("cam2")
        try rig.waitFor(cameraOn)
        #expect(try rig.newSignals() == [cameraOn])
        #expect(try rig.deviceNames("camera") == ["cam2"])
        #expect(try rig.connectionState() == "connected")
        #expect(try rig.status("microphone") == "s \"unsupported\"")

        // And again, while a camera is present.
        rig.pipewire.kill()
        try rig.waitFor(cameraOff)
        #expect(try rig.newSignals() == [cameraOff])
        try rig.pipewire.start()
        try rig.pipewire.addMicrophone("mic2")
        try rig.waitFor(micOn)
        #expect(try rig.newSignals() == [micOn])
        #expect(try rig.status("camera") == "s \"unsupported\"")
    }

    /// Also: without a socket the daemon has not even loaded libpipewire (nor its
    /// loop's thread); the socket's creation brings both.
    @Test func daemonStartedBeforePipeWireFollowsItOnceItAppears() throws {
        let pipewire = try TestPipeWire(start: false)
        let rig = try PipeWireRig(pipewire: pipewire)
        #expect(try rig.status("camera") == "s \"unsupported\"")
        #expect(try rig.status("microphone") == "s \"unsupported\"")
        #expect(try rig.status("location") == "s \"not-determined\"")
        try rig.poll("the plugin's first snapshot") { try rig.connectionState() == "unreachable" }
        #expect(try !UserPipeWireTests.mapsLibpipewire(rig.daemon))
        #expect(UserPipeWireTests.pipewireThreads(rig.daemon) == 0, "\(UserPipeWireTests.threads(rig.daemon))")

        try pipewire.start()
        try pipewire.addCamera("cam1")
        try rig.waitFor(cameraOn)
        #expect(try rig.newSignals() == [cameraOn])
        #expect(try rig.deviceNames("camera") == ["cam1"])
        #expect(try rig.connectionState("microphone") == "connected")
        #expect(try UserPipeWireTests.mapsLibpipewire(rig.daemon))
        // One line for the outage, however many attempts it took.
        let unreachable = rig.daemon.log.components(separatedBy: "PipeWire is not reachable").count - 1
        #expect(unreachable == 1, "\(rig.daemon.log)")
    }

    /// A runtime directory that does not exist yet cannot be watched: the socket is
    /// looked for every 2 s, still without libpipewire, and found once PipeWire
    /// makes it there.
    @Test func aRuntimeDirectoryMadeLaterIsFollowedOnceItsSocketIsThere() throws {
        let pipewire = try TestPipeWire(start: false)
        try FileManager.default.removeItem(atPath: pipewire.runtimeDirectory)
        let rig = try PipeWireRig(pipewire: pipewire)
        try rig.poll("the plugin's first snapshot") { try rig.connectionState() == "unreachable" }
        _ = try rig.daemon.waitForLog("PipeWire is not reachable at \(pipewire.runtimeDirectory)/pipewire-0")
        #expect(try !UserPipeWireTests.mapsLibpipewire(rig.daemon))

        try FileManager.default.createDirectory(atPath: pipewire.runtimeDirectory, withIntermediateDirectories: false)
        try pipewire.start()
        try pipewire.addCamera("cam1")
        try rig.waitFor(cameraOn)
        #expect(try UserPipeWireTests.mapsLibpipewire(rig.daemon))
    }

    @Test func daemonStartedAfterPipeWireSeesTheDevicesAlreadyThere() throws {
        let pipewire = try TestPipeWire()
        try pipewire.addCamera("cam1")
        try pipewire.addCamera("cam2")
        try pipewire.addMicrophone("mic1")
        let rig = try PipeWireRig(pipewire: pipewire, startDaemon: false)
        try rig.startDaemon()
        try rig.poll("the listing applied") {
            try rig.status("camera") == "s \"not-determined\"" && rig.status("microphone") == "s \"not-determined\""
        }
        // The listing is published once, when complete: at most one signal each, though
        // two cameras were listed (in either order: the host may apply both in one
        // batch). None for a permission whose snapshot was applied before the daemon
        // owned its name: start-up is quiet, and a subscriber reads the state once the
        // name appears. The camera's and the microphone's are two publications, which
        // the name can fall between (CI saw the microphone's signal alone).
        let seen = try rig.newSignals()
        #expect(Set(seen).isSubset(of: [cameraOn, micOn]) && Set(seen).count == seen.count, "\(seen)")
        #expect(!seen.contains { $0.contains("unsupported") }, "\(seen)")
        #expect(try rig.deviceNames("camera") == ["cam1", "cam2"])
        #expect(try rig.deviceNames("microphone") == ["mic1"])
    }

    @Test func pipewireNeverAppearingIsUnsupportedAndBlocksNothing() throws {
        let rig = try PipeWireRig(pipewire: TestPipeWire(start: false))
        #expect(try rig.status("camera") == "s \"unsupported\"")
        try rig.poll("the plugin's first snapshot") { try rig.connectionState() == "unreachable" }
        #expect(try rig.daemon.ctl("grant", "org.example.App", "location").status == 0)
        #expect(try rig.daemon.call("GetStatusForApp", "ss", "org.example.App", "location").stdout
                == "s \"authorized\"\n")
        // The user's grant is not broadcast; the fence (an admin lock) is.
        #expect(try rig.newSignals() == [])
        // Stopping needs nothing from PipeWire either.
        rig.daemon.stop()
        #expect(!rig.daemon.isRunning)
    }

    @Test func hungPipeWireDelaysNoCall() throws {
        let pipewire = try TestPipeWire()
        try pipewire.addCamera("cam1")
        pipewire.suspend()
        // Started against a PipeWire that accepts the connection and never answers.
        let rig = try PipeWireRig(pipewire: pipewire)
        // A call that waited on PipeWire would run into busctl's 3 s timeout.
        func quick(_ permission: String) throws -> String {
            let r = try rig.daemon.busctl(["--timeout=3", "call", "org.example.Permissions", "/org/example/Permissions",
                                           "org.example.Permissions", "GetStatus", "s", permission])
            #expect(r.status == 0, "\(r.stderr)")
            return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try quick("camera") == "s \"unsupported\"")
        #expect(try quick("location") == "s \"not-determined\"")
        // Connected (the kernel accepted the socket) but never answered: connecting, and it stays so.
        try rig.poll("the plugin connecting") { try rig.connectionState() == "connecting" }
        #expect(try quick("camera") == "s \"unsupported\"")

        pipewire.resume()
        try rig.waitFor(cameraOn)
        #expect(try rig.newSignals() == [cameraOn])

        // Hung while followed: the last state stands, and calls still answer at once.
        pipewire.suspend()
        #expect(try quick("camera") == "s \"not-determined\"")
        #expect(try quick("microphone") == "s \"unsupported\"")
        #expect(try rig.daemon.ctl("grant", "org.example.App", "camera").status == 0)
        #expect(try rig.daemon.call("GetStatusForApp", "ss", "org.example.App", "camera").stdout == "s \"authorized\"\n")
        #expect(try rig.newSignals() == [])

        // fini does not wait for PipeWire either.
        let before = Date()
        rig.daemon.stop()
        #expect(!rig.daemon.isRunning)
        #expect(Date().timeIntervalSince(before) < 5)
        #expect(rig.daemon.log.contains("stopping"))
        pipewire.resume()
    }

    @Test func pipewireRemoteIsHonoured() throws {
        let pipewire = try TestPipeWire()
        let elsewhere = try makeTemporaryDirectory("empty-runtime")
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        // XDG_RUNTIME_DIR leads nowhere; PIPEWIRE_REMOTE names the socket.
        var environment = ["XDG_RUNTIME_DIR": elsewhere,
                           "PIPEWIRE_REMOTE": pipewire.runtimeDirectory + "/pipewire-0"]
        if ProcessInfo.processInfo.environment["PIPEWIRE_RUNTIME_DIR"] != nil {
            environment["PIPEWIRE_RUNTIME_DIR"] = elsewhere
        }
        let rig = try PipeWireRig(pipewire: pipewire, environment: environment)
        try pipewire.addCamera("cam1")
        try rig.waitFor(cameraOn)
        #expect(try rig.deviceNames("camera") == ["cam1"])
    }
}
