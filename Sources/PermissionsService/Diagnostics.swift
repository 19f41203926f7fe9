internal import PermissionsModel
internal import DBusKit
internal import PermissionsIdentity

// GetDiagnostics: what `permissionsctl doctor` shows about the caller, which no
// property can say (properties are the same for every caller).
// Part of PermissionsService; confined to its queue.
extension PermissionsService {
    func getDiagnostics(_ call: MethodCall) {
        withCaller(call) { [unowned self] identity in
            call.reply([.vardict([
                ("app-id", .string(identity.appID)),
                ("identity-kind", .string(identity.kind.rawValue)),
                ("uid", .uint32(identity.uid)),
                ("has-agent", .boolean(self.broker.hasAgent(for: identity.uid))),
                ("agent-unreachable", .string(self.broker.unreachable(for: identity.uid) ?? "")),
                ("unverified-reason", .string(identity.unverifiedReason)),
                ("host-namespace-problem", .string(self.callers.hostNamespaceProblem() ?? "")),
                ("version", .string(Versions.package)),
            ])])
        }
    }
}
