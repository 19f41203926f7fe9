import Foundation
import Testing

/// Holds the package's target graph to the module map in Sources/README.md: what
/// `swift package describe` says each target depends on, and what each source file
/// imports, must be what the map allows.
@Suite("Module graph") struct ModuleGraphTests {
    /// The daemon's own targets: none of them may reach the plugin SDK.
    static let daemonTargets = ["permissionsd", "PermissionsDaemon", "PermissionsModel", "PermissionsSupport",
                                "PermissionsStore", "PermissionsPluginHost", "PermissionsIdentity", "PermissionsConfig",
                                "PermissionsService"]
    /// What permissionsctl must not reach: everything of the daemon but the vocabulary.
    static let daemonOnly: Set<String> = ["PermissionsSupport", "PermissionsStore", "PermissionsPluginHost",
                                          "PermissionsIdentity", "PermissionsConfig", "PermissionsService",
                                          "PermissionsDaemon"]

    let graph: PackageGraph
    let allowed: [String: Set<String>]

    init() throws {
        graph = try PackageGraph.describe()
        allowed = try ModuleMap.read(graph.root + "/Sources/README.md")
    }

    @Test func everyTargetHasARowAndEveryRowATarget() throws {
        let built = Set(graph.targets.values.filter { $0.type != "test" }.map(\.name))
        #expect(built.subtracting(allowed.keys).sorted() == [], "targets missing from Sources/README.md")
        #expect(Set(allowed.keys).subtracting(built).sorted() == [], "rows of Sources/README.md naming no target")
    }

    @Test func dependenciesAreThoseTheMapAllows() throws {
        for target in graph.targets.values where target.type != "test" {
            let extra = target.dependencies.subtracting(allowed[target.name] ?? [])
            #expect(extra.sorted() == [], "\(target.name) depends on what Sources/README.md does not allow")
        }
    }

    /// A module on the search path can be imported without being declared; this
    /// catches the edges `describe` cannot see.
    @Test func sourcesImportOnlyDeclaredDependencies() throws {
        for target in graph.targets.values {
            for file in target.sources where file.hasSuffix(".swift") {
                let text = try String(contentsOfFile: graph.root + "/" + target.path + "/" + file, encoding: .utf8)
                for module in Self.imports(in: text) where graph.targets[module] != nil {
                    #expect(target.dependencies.contains(module),
                            "\(target.path)/\(file) imports \(module), which \(target.name) does not depend on")
                }
            }
        }
    }

    @Test func theDaemonDoesNotReachPluginKit() throws {
        for name in Self.daemonTargets {
            let reached = try graph.closure(of: name)
            #expect(!reached.contains("PluginKit"), "\(name) reaches PluginKit")
        }
    }

    @Test func theClientDoesNotReachTheDaemon() throws {
        let reached = try graph.closure(of: "permissionsctl")
        #expect(reached.intersection(Self.daemonOnly).sorted() == [])
        #expect(reached.contains("PermissionsModel"), "permissionsctl takes the bus names from PermissionsModel")
    }

    /// Logging, files, the store and the plugin host know nothing of the bus: the
    /// named bus errors are made in the service, the primitives (locks, escaping,
    /// errno) come from SystemPrimitives, not from the D-Bus wrapper.
    @Test func theSharedPartsTheStoreAndThePluginHostDoNotReachTheBus() throws {
        for name in ["PermissionsSupport", "PermissionsStore", "PermissionsPluginHost"] {
            let reached = try graph.closure(of: name)
            #expect(!reached.contains("DBusKit"), "\(name) reaches DBusKit")
        }
    }

    /// The connector holds a capability the daemon does not (CAP_DAC_OVERRIDE): it
    /// is built from the checks it shares with the daemon and the bottom targets,
    /// nothing of the daemon, the bus or the plugins, so that it can be read whole.
    /// (CLinkOrder holds no code: only the order of the libraries it links.)
    @Test func theConnectorReachesOnlyWhatItShares() throws {
        #expect(try graph.closure(of: "permissionsd-connector")
                == ["UserSockets", "SystemPrimitives", "CShims", "CLISupport", "CLinkOrder", "PermissionsModel"])
    }

    /// The bottom target: everything may use it, so it uses nothing of the package.
    @Test func systemPrimitivesDependsOnNothing() throws {
        #expect(try graph.closure(of: "SystemPrimitives") == [])
    }

    @Test func pluginKitDoesNotReachTheDaemon() throws {
        let reached = try graph.closure(of: "PluginKit")
        #expect(reached.intersection(Self.daemonOnly.union(["DBusKit"])).sorted() == [])
    }

    /// The client library and the daemon stay without Foundation (its size, its ICU
    /// data, its start-up): the library takes `LocalizedError` from
    /// FoundationEssentials, the part that has it, and nothing else of Foundation.
    @Test func theClientLibraryAndTheDaemonImportNoFoundation() throws {
        let allowed: [String: Set<String>] = ["PermissionsClient": ["FoundationEssentials"]]
        for name in ["PermissionsClient", "DBusKit", "SystemPrimitives"] + Self.daemonTargets {
            let target = try #require(graph.targets[name])
            for file in target.sources where file.hasSuffix(".swift") {
                let text = try String(contentsOfFile: graph.root + "/" + target.path + "/" + file, encoding: .utf8)
                let foundation = Self.imports(in: text).filter { $0.hasPrefix("Foundation") }
                #expect(Set(foundation).isSubset(of: allowed[name] ?? []), "\(target.path)/\(file) imports \(foundation)")
            }
        }
    }

    /// The modules named by `import` lines (any access level or attribute).
    static func imports(in text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            var words = line.split(separator: " ").map(String.init)
            while let first = words.first, first.hasPrefix("@") || ["public", "package", "internal", "private",
                                                                     "fileprivate"].contains(first) {
                words.removeFirst()
            }
            guard words.count >= 2, words[0] == "import" else { return nil }
            let kinds = ["struct", "class", "enum", "func", "var", "let", "typealias", "protocol"]
            let path = words.count >= 3 && kinds.contains(words[1]) ? words[2] : words[1]
            return String(path.split(separator: ".")[0])
        }
    }
}

/// Sources/README.md's tables: | `Target` | job | `Dep` `Dep` | (— for none).
enum ModuleMap {
    static func read(_ path: String) throws -> [String: Set<String>] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var rows: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            try #require(cells.count >= 5, "a row of the module map: \(line)")
            let name = try #require(names(cells[1]).first, "a row without a target: \(line)")
            #expect(rows[name] == nil, "two rows for \(name)")
            rows[name] = Set(names(cells[3]))
        }
        try #require(!rows.isEmpty, "no module map in \(path)")
        return rows
    }

    /// The `backticked` words of a cell.
    static func names(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }
}

struct Target {
    let name: String
    let type: String
    let path: String
    let sources: [String]
    let dependencies: Set<String>
}

/// The package as `swift package describe --type json` reports it.
struct PackageGraph {
    let root: String
    let targets: [String: Target]

    static func describe() throws -> PackageGraph {
        // Tests/ModuleGraphTests/ModuleGraphTests.swift -> the package root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let swift = try #require(findSwift(), "no swift executable on PATH")
        // A scratch path of its own: the .build of the running `swift test` is locked.
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("module-graph-\(getpid())-\(UInt64.random(in: 0...UInt64.max))").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: swift)
        process.arguments = ["package", "--package-path", root, "--scratch-path", scratch, "describe", "--type", "json"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "swift package describe exited with \(process.terminationStatus)")
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let list = try #require(json["targets"] as? [[String: Any]])
        var targets: [String: Target] = [:]
        for t in list {
            let name = try #require(t["name"] as? String)
            let deps = (t["target_dependencies"] as? [String] ?? []) + (t["product_dependencies"] as? [String] ?? [])
            targets[name] = Target(name: name, type: t["type"] as? String ?? "", path: t["path"] as? String ?? "",
                                   sources: t["sources"] as? [String] ?? [], dependencies: Set(deps))
        }
        try #require(targets["permissionsd"] != nil && targets["permissionsctl"] != nil, "not this package")
        return PackageGraph(root: root, targets: targets)
    }

    static func findSwift() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").map { $0 + "/swift" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Every target `name` depends on, directly or not.
    func closure(of name: String) throws -> Set<String> {
        try #require(targets[name] != nil, "no target \(name)")
        var seen: Set<String> = []
        var todo = Array(targets[name]!.dependencies)
        while let next = todo.popLast() {
            if seen.insert(next).inserted { todo += targets[next]?.dependencies ?? [] }
        }
        return seen
    }
}
