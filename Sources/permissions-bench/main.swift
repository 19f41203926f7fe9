// permissions-bench: benchmarks of the permissions service (not part of the test
// suite). Each subcommand sets up what it needs on private buses/daemons, measures,
// and prints a table and JSON lines.
import Foundation

let usage = """
    Usage: permissions-bench COMMAND [OPTIONS]

    Commands:
      pipewire    node appearing in the PipeWire registry -> StatusChanged received
      bluez       PropertiesChanged(Powered) on the bus -> StatusChanged received
      local-network
                  a link going down or up in the kernel -> StatusChanged received
      core        GetStatus latency/throughput, fan-out, start-up, RSS, scale, against
                  a libdbus floor and xdg-permission-store (core --help)
      config-edits
                  another user's GetStatus while the configuration (5 000 drop-ins) is
                  edited every 200 ms, against idle (config-edits --help)
      memory      idle RSS, PSS and USS of permissionsd (and xdg-permission-store), and
                  its largest mappings by resident size

    """

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "pipewire": runPipeWireBench(Array(arguments.dropFirst()))
case "bluez": runBlueZBench(Array(arguments.dropFirst()))
case "local-network": runLocalNetworkBench(Array(arguments.dropFirst()))
case "link-helper": runLinkHelper()  // started by `local-network`, inside its namespace
case "core": runCoreBench(Array(arguments.dropFirst()))
case "config-edits": runConfigEditsBench(Array(arguments.dropFirst()))
case "config-caller": runConfigCaller(Array(arguments.dropFirst()))  // started by `config-edits`, as another user
case "memory": runMemoryBench(Array(arguments.dropFirst()))
case "floor-service": runCoreFloorService(Array(arguments.dropFirst()))  // started by `core`
default:
    FileHandle.standardError.write(usage.data(using: .utf8)!)
    exit(2)
}
