internal import DBusKit
internal import PermissionsModel
internal import PermissionsSupport
internal import SystemPrimitives

// Whether the daemon's calls reach an agent. On a system bus whose policy does not
// let the daemon's user call org.example.Permissions.Agent (an old or missing
// policy file: Debian's system.conf denies every method call no file allows), every
// Ask fails with AccessDenied, and each request quietly takes its no-agent answer.
// So an agent is checked when it registers (a Cancel naming no prompt, which the
// Agent interface says to ignore), every Ask's delivery is noted, the first failure
// is logged once with its remedy, and GetDiagnostics (`agent-unreachable`) tells
// `permissionsctl doctor`.
// Part of PromptBroker; confined to the service queue.
extension PromptBroker {
    /// Why the calls to `uid`'s agent (the newest, which gets the prompts) do not
    /// reach it, or nil: it is reachable, not yet checked, or there is none.
    func unreachable(for uid: UInt32) -> String? {
        agents.last { $0.uid == uid }?.unreachable
    }

    /// Checks a newly registered agent: Cancel with the empty prompt id, which no
    /// prompt has. At most one check per user at a time.
    func probe(_ agent: Agent) {
        guard !probing.contains(agent.uid),
              let message = try? Message.methodCall(destination: agent.owner, path: agent.path,
                                                    interface: BusNames.agentInterfaceName, member: "Cancel"),
              (try? message.append(.string(""))) != nil
        else { return }
        let uid = agent.uid  // the agent may be gone when the answer comes
        probing.insert(uid)
        callAgent(agent, message, timeoutMilliseconds: Self.probeTimeoutMilliseconds) { [weak self, weak agent] result in
            guard let self else { return }
            self.probing.remove(uid)
            if let agent { self.noteDelivery(to: agent, result, isCheck: true) }
        }
    }

    static let probeTimeoutMilliseconds: Int32 = 5000

    /// Records what a call to `agent` showed: reached (any reply the agent itself
    /// made, success or error), or not reached, and why.
    /// An Ask's timeout is a person who did not answer; only the check's short wait
    /// (`isCheck`) tells a hung agent.
    func noteDelivery(to agent: Agent, _ result: Result<Message, BusError>, isCheck: Bool = false) {
        guard case .failure(let error) = result,
              let problem = Self.deliveryProblem(error, agent: agent, isCheck: isCheck) else {
            agent.unreachable = nil
            return
        }
        agent.unreachable = problem
        guard !agent.warnedUnreachable else { return }
        agent.warnedUnreachable = true
        logWarning("agent \(agent.owner) \(agent.path) of uid \(agent.uid) cannot be reached: \(problem)")
    }

    /// The problem, in words with its remedy, when `error` means the call never
    /// reached the agent (or the agent cannot take it); nil for an error the agent
    /// made itself, an agent that left (it is unregistered), and the daemon's own
    /// limits (no fault of the agent's).
    static func deliveryProblem(_ error: BusError, agent: Agent, isCheck: Bool) -> String? {
        let said = "\(error.name): \(error.message)".escapedForMessage
        switch error.name {
        case "org.freedesktop.DBus.Error.AccessDenied":
            return "the bus refused the daemon's call (\(said)); its policy must let the daemon's user call "
                + "\(BusNames.agentInterfaceName): install this version's org.example.Permissions.conf in the bus's "
                + "system.d directory (/usr/share/dbus-1/system.d) and reload the bus"
        case "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownObject",
             "org.freedesktop.DBus.Error.UnknownInterface":
            return "it does not implement \(BusNames.agentInterfaceName) at \(agent.path) (\(said))"
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            return isCheck ? "it did not answer within \(probeTimeoutMilliseconds / 1000) s (\(said))" : nil
        default:
            return nil
        }
    }
}
