internal import DBusKit
internal import PermissionsSupport

// The daemon's calls to agents (Ask, Cancel, the reachability check), each
// counted against the agent's uid (OutgoingCalls): an agent that never answers
// holds its own user's share, never another user's. Part of PromptBroker;
// confined to the service queue.
extension PromptBroker {
    /// Calls `agent`; `reply` runs once, later, on the queue. Over the user's share
    /// it gets LimitExceeded and nothing is sent. A reply that exceeds the limits
    /// the daemon sets for incoming calls (ArgumentLimits) is refused before it is
    /// decoded, as InvalidArgs: an agent is another user's program, and its answer
    /// is only ever a word and a few options.
    func callAgent(_ agent: Agent, _ message: Message, timeoutMilliseconds: Int32,
                   reply: @escaping (Result<Message, BusError>) -> Void) {
        let limits = connection.argumentLimits
        outgoing.call(message, for: agent.uid, timeoutMilliseconds: timeoutMilliseconds) { result in
            if case .success(let answer) = result, let limits, let problem = answer.exceeds(limits) {
                return reply(.failure(BusError(BusError.invalidArgs, "the agent's reply: \(problem)")))
            }
            reply(result)
        }
    }
}
