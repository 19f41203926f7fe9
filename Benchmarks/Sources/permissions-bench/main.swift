// permissions-bench: benchmarks of the permissions service, a tool of the
// repository (scripts/bench), not a product. Each subcommand sets up what it needs
// on private buses and daemons, measures, and prints tables and JSON lines; the
// limits it judges by are read from Benchmarks/limits.json. It runs the daemon and
// the plugins of a build of the main package: $PERMISSIONS_BIN_DIR, else .build/debug.
import Foundation

let usage = """
    Usage: permissions-bench COMMAND [OPTIONS]

    Commands:
      pipewire    node appearing in the PipeWire registry -> StatusChanged received
      enforcement SetDecision (deny, grant) of the app's camera -> the camera's node gone from
                  (back in) the registry of its OpenPipeWireRemote connection
      bluez       PropertiesChanged(Powered) on the bus -> StatusChanged received
      local-network
                  a link going down or up in the kernel -> StatusChanged received
      core        GetStatus latency/throughput, fan-out, start-up, RSS, scale, against
                  a libdbus floor and xdg-permission-store (core --help)
      config-edits
                  another user's GetStatus while the configuration (5 000 drop-ins) is
                  edited every 200 ms, against idle (config-edits --help)
      request-handles
                  another user's GetStatus while one user floods StartRequest up to
                  requests-per-connection and requests-per-user, against idle
                  (request-handles --help)
      memory      idle RSS, PSS and USS of permissionsd (and xdg-permission-store), and
                  its largest mappings by resident size

    """

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "pipewire": runPipeWireBench(Array(arguments.dropFirst()))
case "enforcement": runEnforcementBench(Array(arguments.dropFirst()))
case "bluez": runBlueZBench(Array(arguments.dropFirst()))
case "local-network": runLocalNetworkBench(Array(arguments.dropFirst()))
case "link-helper": runLinkHelper()  // started by `local-network`, inside its namespace
case "core": runCoreBench(Array(arguments.dropFirst()))
case "config-edits": runConfigEditsBench(Array(arguments.dropFirst()))
case "request-handles": runRequestHandlesBench(Array(arguments.dropFirst()))
case "other-user-caller": runOtherUserCaller(Array(arguments.dropFirst()))  // started by config-edits and request-handles
case "memory": runMemoryBench(Array(arguments.dropFirst()))
case "floor-service": runCoreFloorService(Array(arguments.dropFirst()))  // started by `core`
default:
    fail(usage, code: 2)
}
