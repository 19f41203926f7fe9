// permissions-bench: benchmarks of the permissions service (not part of the test
// suite). Each subcommand sets up what it needs on private buses/daemons, measures,
// and prints a table and JSON lines.
import Foundation

let usage = """
    Usage: permissions-bench COMMAND [OPTIONS]

    Commands:
      pipewire    node appearing in the PipeWire registry -> StatusChanged received
      bluez       PropertiesChanged(Powered) on the bus -> StatusChanged received

    """

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "pipewire": runPipeWireBench(Array(arguments.dropFirst()))
case "bluez": runBlueZBench(Array(arguments.dropFirst()))
default:
    FileHandle.standardError.write(usage.data(using: .utf8)!)
    exit(2)
}
