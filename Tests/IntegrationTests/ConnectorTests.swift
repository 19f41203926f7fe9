import Foundation
import Testing
import PermissionsTestSupport

/// permissionsd-connector on its own, under its unit's capability bounding set
/// (ConnectorHarness.swift), asked by a client that writes the protocol out itself
/// (Tests/testenv/connector-client.py): what it hands over, and each refusal, each
/// with a real process or file: a caller that is not root, a directory or socket
/// that is not the user's, symbolic links, a server of another user's, names and
/// uids it does not serve, and malformed requests, after which it still serves.
@Suite("permissionsd-connector", .serialized)
struct ConnectorTests {
    static let user1: UInt32 = 1
    static let user2: UInt32 = 2
    static let granted = "result 0; fd peer-uid=1 type=stream"

    /// Root asks for user 1's PipeWire and gets a stream connected to it, served by
    /// uid 1. A user without PipeWire, and a stale socket, are no refusal of anyone
    /// (info). Without CAP_DAC_OVERRIDE the same request is refused: that one
    /// capability is what the connector needs, and the daemon's unit lacks.
    @Test func rootGetsAUsersConnectionToTheirOwnPipeWire() throws {
        let root = try TestRuntimeRoot()
        let one = try root.startPipeWire(Self.user1)
        try root.makeUserDirectory(Self.user2)
        let connector = try TestConnector(root: root.path)
        #expect(try connector.ask(uid: Self.user1) == Self.granted)
        _ = try connector.waitForLine("handed pid")

        #expect(try connector.ask(uid: Self.user2) == "result -2")
        let missing = try connector.waitForLine("refused pid")
        #expect(missing.hasPrefix("<6>") && missing.contains("\(root.path)/2/pipewire-0: No such file"), "\(missing)")
        one.kill()  // its socket stays behind
        #expect(try connector.ask(uid: Self.user1) == "result -111")
        #expect(connector.refusals.isEmpty, "\(connector.refusals)")

        try one.start()
        let bounded = try TestConnector(root: root.path, boundingSet: "-all")
        #expect(try bounded.ask(uid: Self.user1) == "result -13")
        let line = try bounded.waitForLine("refused pid")
        #expect(line.contains("Permission denied (errno 13)"), "\(line)")
        #expect(try connector.ask(uid: Self.user1) == Self.granted)
    }

    /// A caller that is not root is refused, even when it can reach the socket
    /// (made reachable here: the directory 0755, the socket 0666), and logged;
    /// root is served right after.
    @Test func aCallerThatIsNotRootIsRefused() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1)
        let connector = try TestConnector(root: root.path)
        #expect(chmod(connector.directory, 0o755) == 0 && chmod(connector.socket, 0o666) == 0)
        #expect(try connector.ask(["--uid", "1"], as: Self.user1) == "result -13")
        let line = try connector.waitForLine("refused pid")
        #expect(line.hasPrefix("<4>") && line.contains("(uid 1): only root may ask"), "\(line)")
        #expect(try connector.ask(["--uid", "2"], as: Self.user2) == "result -13")
        #expect(try connector.ask(uid: Self.user1) == Self.granted)
    }

    /// ROOT/1 owned by uid 2 (with uid 2's PipeWire in it): not user 1's.
    @Test func aDirectoryNotOwnedByTheUserIsRefused() throws {
        let root = try TestRuntimeRoot()
        let directory = root.path + "/1"
        #expect(mkdir(directory, 0o700) == 0 && chown(directory, Self.user2, Self.user2) == 0)
        let twos = UserPipeWire(uid: Self.user2, runtimeDirectory: directory)
        try twos.start()
        let connector = try TestConnector(root: root.path)
        #expect(try connector.ask(uid: Self.user1) == "result -1")
        let line = try connector.waitForLine("refused pid")
        #expect(line.contains("\(directory) is owned by uid 2, not 1"), "\(line)")
    }

    /// The socket's name a symbolic link to the user's real socket, and the user's
    /// directory a symbolic link to another user's: neither is followed. The
    /// socket put back where it belongs is served.
    @Test func symbolicLinksAreNotFollowed() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1)
        let socket = root.path + "/1/pipewire-0"
        let moved = root.path + "/1/moved-0"
        #expect(rename(socket, moved) == 0)  // still bound: a rename keeps the socket's inode
        #expect(symlink("moved-0", socket) == 0 && lchown(socket, Self.user1, Self.user1) == 0)
        #expect(symlink("1", root.path + "/3") == 0 && lchown(root.path + "/3", 3, 3) == 0)
        let connector = try TestConnector(root: root.path)

        #expect(try connector.ask(uid: Self.user1) == "result -1")
        let line = try connector.waitForLine("refused pid")
        #expect(line.contains("\(socket) is not a socket (a symbolic link)"), "\(line)")
        #expect(try connector.ask(uid: 3) == "result -1")
        let directoryLine = try connector.waitForLine("refused pid")
        #expect(directoryLine.contains("\(root.path)/3 is not a directory"), "\(directoryLine)")

        #expect(rename(moved, socket) == 0)
        #expect(try connector.ask(uid: Self.user1) == Self.granted)
    }

    /// A regular file of the user's where the socket should be, and a socket in the
    /// user's directory that is root's.
    @Test func aFileThatIsNotTheUsersSocketIsRefused() throws {
        let root = try TestRuntimeRoot()
        let directory = try root.makeUserDirectory(Self.user1)
        let path = directory + "/pipewire-0"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("not a socket".utf8)))
        #expect(chown(path, Self.user1, Self.user1) == 0)
        let connector = try TestConnector(root: root.path)
        #expect(try connector.ask(uid: Self.user1) == "result -1")
        #expect(try connector.waitForLine("refused pid").contains("\(path) is not a socket (a regular file)"))

        try FileManager.default.removeItem(atPath: path)
        let roots = try SocketServer(at: path, as: 0)
        #expect(try connector.ask(uid: Self.user1) == "result -1")
        #expect(try connector.waitForLine("refused pid").contains("\(path) is owned by uid 0, not 1"))
        withExtendedLifetime(roots) {}
    }

    /// The user's own socket file in the user's own directory, but served by a
    /// process of uid 2 (bound elsewhere, moved in and given to uid 1): everything
    /// the path shows is user 1's, and the server is not. SO_PEERCRED of the
    /// connection refuses it.
    @Test func aSocketServedByAnotherUserIsRefused() throws {
        let root = try TestRuntimeRoot()
        let directory = try root.makeUserDirectory(Self.user1)
        let elsewhere = try makeTemporaryDirectory("other-user")
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        #expect(chown(elsewhere, Self.user2, Self.user2) == 0)
        let twos = try SocketServer(at: elsewhere + "/server", as: Self.user2)
        let path = directory + "/pipewire-0"
        #expect(rename(elsewhere + "/server", path) == 0 && lchown(path, Self.user1, Self.user1) == 0)
        let connector = try TestConnector(root: root.path)
        #expect(try connector.ask(uid: Self.user1) == "result -1")
        let line = try connector.waitForLine("refused pid")
        #expect(line.contains("\(path) is served by uid 2 (pid "), "\(line)")
        withExtendedLifetime(twos) {}
    }

    /// Another socket of the user's, a name that climbs out of the directory, and
    /// uid 0: not served, whatever is there.
    @Test func namesOffTheAllowListAndUidZeroAreRefused() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1)
        let bus = try SocketServer(at: root.path + "/1/bus", as: Self.user1)
        let connector = try TestConnector(root: root.path)
        #expect(try connector.ask(["--uid", "1", "--name", "bus"]) == "result -1")
        #expect(try connector.waitForLine("refused pid").contains("\"bus\" is not a socket it connects"))
        #expect(try connector.ask(["--uid", "1", "--name", "../1/pipewire-0"]) == "result -1")
        #expect(try connector.waitForLine("refused pid").contains("is not a socket it connects"))
        #expect(try connector.ask(["--uid", "0"]) == "result -1")
        #expect(try connector.waitForLine("refused pid").contains("uid 0 is no user"))
        #expect(try connector.ask(uid: Self.user1) == Self.granted)
        withExtendedLifetime(bus) {}
    }

    /// Requests outside the protocol: each answered with an error, or (a caller
    /// that sends nothing) closed after the connector's timeout, each logged; and
    /// after each, the next caller is served.
    @Test func malformedRequestsAreAnsweredOrClosedAndServingGoesOn() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1)
        let connector = try TestConnector(root: root.path)
        let cases: [(options: [String], answer: String, logged: String)] = [
            (["--truncate", "4"], "result -22", "a request of 4 bytes, not 72"),
            (["--pad", "28"], "result -22", "a request of more than 72 bytes, not 72"),
            (["--empty"], "result -22", "a request of 0 bytes, not 72"),
            (["--magic", "0x12345678"], "result -22", "a request without the magic word"),
            (["--magic", "0x50434E02"], "result -93", "a request of protocol version 2"),
            (["--no-nul"], "result -22", "a request whose name has no NUL"),
            (["--with-fd"], "result -22", "a request carrying a descriptor"),
            (["--silent"], "closed", "no request within 1000 ms"),
        ]
        for (options, answer, logged) in cases {
            #expect(try connector.ask(options) == answer, "\(options)")
            let line = try connector.waitForLine("refused pid")
            #expect(line.contains(logged), "\(options): \(line)")
            #expect(try connector.ask(uid: Self.user1) == Self.granted, "after \(options)")
        }
        #expect(connector.isRunning)
    }
}
