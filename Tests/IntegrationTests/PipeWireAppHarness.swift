import Foundation
import PermissionsTestSupport

/// Tests/testenv/pwremote.c, "an app" that asks the service for a PipeWire
/// connection (OpenPipeWireRemote) and reports its registry line by line; built
/// once per test process.
enum PWRemoteTool {
    private static let built = Result {
        try TestTool.build("pwremote", packages: ["libpipewire-0.3", "gio-2.0", "gio-unix-2.0"])
    }

    static func path() throws -> String { try built.get() }
}

/// One running pwremote as user `uid`: the connection it got and what its
/// registry shows, as the objects it can see now (globals minus removals).
final class PipeWireApp {
    let program: RunningProgram

    /// A pwremote already started (on a machine of the real-machine tier).
    init(program: RunningProgram) {
        self.program = program
    }

    /// Asks for a `permission` connection on the bus at `address`.
    init(address: String, asUser uid: UInt32, permission: String = "camera") throws {
        var environment = environmentWithoutPipeWire()
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
        program = try RunningProgram(try PWRemoteTool.path(), [permission], asUser: uid, environment: environment)
    }

    /// The first line: "synced" (connected, its first registry burst in), or the
    /// service's refusal ("error NAME MESSAGE").
    func firstAnswer() throws -> String {
        try program.lines.next { $0 == "synced" || $0.hasPrefix("error ") }
    }

    /// What its registry shows now.
    var registry: Registry { Registry(lines: program.lines.all) }

    /// Waits until what its registry shows satisfies `predicate` (each new line is a chance).
    func waitUntil(_ what: String, timeout: TimeInterval = 15, _ predicate: @escaping (Registry) -> Bool) throws {
        // The collector's lock is held while the predicate runs: it reads the lines given.
        try program.lines.wait(timeout: timeout, what: what) { predicate(Registry(lines: $0)) }
    }

    /// The objects a registry shows, from pwremote's lines: each "global" not
    /// followed by its "remove".
    struct Registry {
        var objects: [UInt32: (type: String, properties: [String: String])] = [:]

        init(lines: [String]) {
            for line in lines {
                let words = line.split(separator: " ").map(String.init)
                if words.first == "global", words.count >= 3, let id = UInt32(words[1]) {
                    var properties: [String: String] = [:]
                    for pair in words.dropFirst(3) {
                        guard let eq = pair.firstIndex(of: "=") else { continue }
                        properties[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
                    }
                    objects[id] = (words[2], properties)
                } else if words.first == "remove", words.count == 2, let id = UInt32(words[1]) {
                    objects[id] = nil
                }
            }
        }

        /// The node names it shows.
        var nodeNames: Set<String> {
            Set(objects.values.filter { $0.type == "Node" }.compactMap { $0.properties["node.name"] })
        }

        /// The id of the node named `name`, if it shows one.
        func nodeID(_ name: String) -> UInt32? {
            objects.first { $0.value.type == "Node" && $0.value.properties["node.name"] == name }?.key
        }
    }

    /// Its own video stream's node id.
    func makeStream() throws -> UInt32 {
        program.answer("stream")
        let line = try program.lines.next { $0.hasPrefix("stream-node ") || $0.hasPrefix("stream-error") }
        guard let id = UInt32(line.dropFirst("stream-node ".count)) else { throw HarnessError(description: line) }
        return id
    }

    /// A link it makes from `output` to `input` (node ids): the link's id.
    func link(_ output: UInt32, _ input: UInt32) throws -> UInt32 {
        program.answer("link \(output) \(input)")
        let line = try program.lines.next { $0.hasPrefix("link ") || $0.hasPrefix("link-error") }
        guard let id = UInt32(line.dropFirst("link ".count)) else { throw HarnessError(description: line) }
        return id
    }
}
