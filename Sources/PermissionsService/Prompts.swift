internal import DBusKit
internal import PermissionsModel
internal import PermissionsSupport
internal import PermissionsStore
internal import SystemPrimitives

/// What an agent answered.
package enum AgentAnswer: String, Sendable {
    case allowOnce = "allow-once"
    case allowSession = "allow-session"
    case allowAlways = "allow-always"
    case deny
    case dismiss
}

/// How a prompt ended for its waiters, besides the status: what a handle's
/// Response code says (RequestHandles.swift). Request and RequestMany reply
/// with the status alone.
enum AskEnd: UInt32, Comparable {
    /// The user answered (or nobody had to be asked: the status was decided, or
    /// the permission's no-agent setting answered).
    case answered = 0
    /// The user dismissed the prompt.
    case dismissed = 1
    /// Anything else: the agent timed out, failed, gave an answer that could not be
    /// taken or went away; the answer could not be stored; the service is stopping.
    case ended = 2

    static func < (a: AskEnd, b: AskEnd) -> Bool { a.rawValue < b.rawValue }
}

/// What a waiter of a prompt is told: the status (or the error), and how it ended.
typealias AskDone = (Result<Status, BusError>, AskEnd) -> Void

/// A registered agent: an object on some connection that implements
/// org.example.Permissions.Agent (dbus/org.example.Permissions.Agent.xml).
/// It serves one user: the uid of the connection that registered it.
final class Agent {
    let owner: String
    let path: String
    let uid: UInt32
    var active: Prompt?
    var queued: [Prompt] = []
    /// Why the daemon's calls do not reach it (AgentReachability.swift), or nil.
    var unreachable: String?
    /// Whether that was logged: once an agent, not once a prompt.
    var warnedUnreachable = false

    init(owner: String, path: String, uid: UInt32) {
        self.owner = owner
        self.path = path
        self.uid = uid
    }
}

/// What makes two requests one prompt: the same user, app and permission (and
/// view: a script's status does not count allow=, so it is not an executable's of
/// the same path). Requests of different users are never merged (each user's
/// agent asks its own user).
struct PromptKey: Hashable {
    let uid: UInt32
    let app: String
    let permission: String
    var script = false
}

/// One question to a user, shared by every request of that user for the same
/// app and permission made while it is open.
final class Prompt {
    let id: String
    /// The requesting user's uid: only an agent of this uid is asked.
    let uid: UInt32
    let app: String
    let permission: String
    /// Whether the requesters are identified by their script (see Audience.script).
    let script: Bool
    let reason: String
    let details: [(String, DBusValue)]
    /// Callers waiting for the answer: (unique name, the handle's path for a
    /// StartRequest, reply): the status, or the error every one of them gets (an
    /// answer that could not be stored).
    var waiters: [(sender: String, handle: String?, done: AskDone)] = []
    /// Set once the prompt is settled (answered, cancelled, failed); a late answer
    /// from the agent is then dropped.
    var finished = false

    init(id: String, uid: UInt32, app: String, permission: String, script: Bool = false, reason: String,
         details: [(String, DBusValue)]) {
        self.id = id
        self.uid = uid
        self.app = app
        self.permission = permission
        self.script = script
        self.reason = reason
        self.details = details
    }

    var key: PromptKey { PromptKey(uid: uid, app: app, permission: permission, script: script) }

    /// Whose view the prompt's status is in.
    var audience: Audience { script ? .script(uid) : .user(uid) }
}

/// Runs prompts through agents: a user's prompts only through that user's agents
/// (the newest of them), one prompt at a time per agent, one prompt per
/// (uid, app, permission) however many requests wait for it, and nothing stored unless
/// the user really answered (a dismissal, a timeout, an agent error or crash, or
/// every requester leaving stores nothing).
///
/// Confined to the service queue.
final class PromptBroker {
    let connection: Connection
    /// Every call to an agent goes through it, counted against the agent's uid (AgentCalls.swift).
    let outgoing: OutgoingCalls
    /// The newest registration of a uid gets that uid's new prompts.
    private(set) var agents: [Agent] = []
    private var open: [PromptKey: Prompt] = [:]
    private var nextID = 0
    /// Set by shutdown: no prompt starts any more.
    private var stopped = false
    /// Users whose agent's reachability check is under way: at most one each, so
    /// that registrations cannot pile up the daemon's pending calls.
    var probing: Set<UInt32> = []
    var agentTimeoutMilliseconds: Int32 = 120_000
    /// Applies a real answer (store, session grant, signals); gives `done` the
    /// status to reply with, once the answer is on disk, or the error to fail
    /// every waiter with (StorageFailed).
    let settle: (Prompt, AgentAnswer, _ expiresAt: Int64?, _ agent: Agent,
                 _ done: @escaping (Result<Status, BusError>) -> Void) -> Void
    /// The status to reply with when nothing was decided.
    let undecided: (Prompt) -> Status

    init(connection: Connection, outgoing: OutgoingCalls,
         settle: @escaping (Prompt, AgentAnswer, Int64?, Agent, @escaping (Result<Status, BusError>) -> Void) -> Void,
         undecided: @escaping (Prompt) -> Status) {
        self.connection = connection
        self.outgoing = outgoing
        self.settle = settle
        self.undecided = undecided
    }

    /// Whether a prompt of `uid`'s is open (its answer is still to be stored).
    func hasPrompt(for uid: UInt32) -> Bool { open.keys.contains { $0.uid == uid } }

    /// Whether a connection of `uid` has an agent registered.
    func hasAgent(for uid: UInt32) -> Bool { agents.contains { $0.uid == uid } }

    /// `uid` is the registering connection's: the agent gets only that user's prompts.
    func register(owner: String, path: String, uid: UInt32) -> Bool {
        guard !agents.contains(where: { $0.owner == owner && $0.path == path }) else { return false }
        let agent = Agent(owner: owner, path: path, uid: uid)
        agents.append(agent)
        logInfo("agent \(owner) \(path) of uid \(uid) registered")
        return true
    }

    func unregister(owner: String, path: String?) -> Bool {
        let leaving = agents.filter { $0.owner == owner && (path == nil || $0.path == path) }
        agents.removeAll { a in leaving.contains { $0 === a } }
        for agent in leaving {
            logInfo("agent \(agent.owner) \(agent.path) unregistered")
            // Its prompts go to the user's next agent, if any; an open one is answered "undecided".
            if let prompt = agent.active { finish(prompt, status: undecided(prompt), .ended) }
            for prompt in agent.queued { enqueue(prompt) }
        }
        return !leaving.isEmpty
    }

    /// Asks `uid`'s agent (or joins that user's open prompt for the same app and
    /// permission). `done` runs once with the status to reply with, or the error to
    /// answer. `handle` names a StartRequest's waiter, so that Close takes it alone.
    func ask(uid: UInt32, app: String, permission: String, script: Bool = false, reason: String,
             details: [(String, DBusValue)], sender: String, handle: String? = nil, done: @escaping AskDone) {
        // Stopping: the caller has been answered (Cancelled); nothing is asked.
        guard !stopped else { return }
        let key = PromptKey(uid: uid, app: app, permission: permission, script: script)
        if let prompt = open[key] {
            prompt.waiters.append((sender, handle, done))
            return
        }
        nextID += 1
        let prompt = Prompt(id: "\(nextID)", uid: uid, app: app, permission: permission, script: script, reason: reason,
                            details: details)
        prompt.waiters.append((sender, handle, done))
        open[key] = prompt
        enqueue(prompt)
    }

    private func enqueue(_ prompt: Prompt) {
        // Another user's agent is never asked: without one of the prompt's uid, nothing is.
        guard let agent = agents.last(where: { $0.uid == prompt.uid }) else {
            return finish(prompt, status: undecided(prompt), .ended)
        }
        agent.queued.append(prompt)
        if agent.active != nil {
            logDebug("prompt \(prompt.id): waits for agent \(agent.owner), \(agent.queued.count) in its queue")
        }
        startNext(agent)
    }

    private func startNext(_ agent: Agent) {
        guard !stopped, agent.active == nil, !agent.queued.isEmpty else { return }
        let prompt = agent.queued.removeFirst()
        agent.active = prompt
        // How many more wait for this agent after this one, as the Ask leaves: an
        // agent gets one Ask at a time, and shows "1 of 3" from it.
        let details = prompt.details + [("queued", .uint32(UInt32(agent.queued.count)))]
        let message: Message
        do {
            message = try Message.methodCall(destination: agent.owner, path: agent.path,
                                             interface: BusNames.agentInterfaceName, member: "Ask")
            try message.append(.string(prompt.id), .string(prompt.app), .string(prompt.permission),
                               .string(prompt.reason), .vardict(details))
        } catch {
            logWarning("cannot ask agent \(agent.owner): \(error)")
            return agentDone(agent, prompt) { self.finish(prompt, status: self.undecided(prompt), .ended) }
        }
        logDebug("prompt \(prompt.id): asking agent \(agent.owner) about \(prompt.app) / \(prompt.permission)")
        callAgent(agent, message, timeoutMilliseconds: agentTimeoutMilliseconds) { [weak self, weak agent] result in
            guard let self, let agent else { return }
            self.agentDone(agent, prompt) {
                guard !prompt.finished else { return }  // cancelled meanwhile: drop the answer
                // Not sent: the user is over their share of the daemon's calls.
                if case .failure(let error) = result, OutgoingCalls.isLimit(error) {
                    return self.finish(prompt, .failure(error), .ended)
                }
                self.noteDelivery(to: agent, result)
                switch result {
                case .failure(let error):
                    // No reply in time: the agent may still show the prompt, and would
                    // get its next Ask meanwhile. Told to close it (before that Ask,
                    // on the same connection).
                    let timedOut = error.name == BusError.noReply
                    if timedOut { self.cancel(prompt, at: agent) }
                    logInfo("prompt \(prompt.id): no answer from agent \(agent.owner) (\(error.name))"
                            + (timedOut ? "; cancelled" : "") + "; nothing stored")
                    self.finish(prompt, status: self.undecided(prompt), .ended)
                case .success(let reply):
                    let parsed = Self.parseAnswer(reply)
                    guard case .success(let (answer, expiresAt)) = parsed else {
                        logWarning("prompt \(prompt.id): agent \(agent.owner) \(parsed.refusal ?? ""); treated as "
                                   + "dismissed, nothing stored")
                        // Not the user's dismissal as far as anyone knows: an agent's fault.
                        return self.finish(prompt, status: self.undecided(prompt), .ended)
                    }
                    logInfo("prompt \(prompt.id): \(prompt.app) / \(prompt.permission): \(answer.rawValue)")
                    if answer == .dismiss { return self.finish(prompt, status: self.undecided(prompt), .dismissed) }
                    // The prompt stays open until the answer is stored: a request for
                    // the same thing meanwhile waits for it rather than asking again.
                    self.settle(prompt, answer, expiresAt, agent) { self.finish(prompt, $0, .answered) }
                }
            }
        }
    }

    /// The longest an agent's decision may last: a hundred years.
    static let maxLifetimeMicroseconds: Int64 = 100 * 366 * 24 * 3600 * 1_000_000

    /// An agent's reply, checked: signature "sa{sv}", a known answer, and an
    /// "expires-at" (x) after `now` and at most a hundred years after it. Anything
    /// else is refused, saying what was wrong and quoting it, and counts as a
    /// dismissal: an agent's values are never guessed at.
    static func parseAnswer(_ reply: Message, now: Int64 = currentMicroseconds())
        -> Result<(AgentAnswer, Int64?), AnswerRefused>
    {
        guard reply.signature == "sa{sv}" else {
            return .failure(AnswerRefused("answered with the signature \"\(reply.signature.escapedForMessage)\", "
                                          + "not \"sa{sv}\""))
        }
        let args = reply.arguments()
        let word = args[0].stringValue ?? ""
        guard let answer = AgentAnswer(rawValue: word) else {
            return .failure(AnswerRefused("answered \"\(word.escapedForMessage)\", which is no answer"))
        }
        var expiresAt: Int64? = nil
        for (key, value) in args[1].stringKeyedEntries ?? [] where key == "expires-at" {
            guard case .variant(.int64(let at)) = value else {
                return .failure(AnswerRefused("gave an \"expires-at\" that is not an int64 (x): "
                                              + "\("\(value)".escapedForMessage)"))
            }
            let latest = now.addingReportingOverflow(maxLifetimeMicroseconds).partialValue
            guard at > now, at <= latest else {
                return .failure(AnswerRefused("gave \"expires-at\" \(at), outside the accepted range: after now "
                                              + "(\(now)) and at most a hundred years ahead (\(latest)), in µs since "
                                              + "the Unix epoch"))
            }
            expiresAt = at
        }
        return .success((answer, expiresAt))
    }

    /// Why an agent's reply was not taken (for the log), as `parseAnswer` found it.
    struct AnswerRefused: Error {
        let why: String
        init(_ why: String) { self.why = why }
    }

    /// Frees the agent for its next prompt after `body`.
    private func agentDone(_ agent: Agent, _ prompt: Prompt, _ body: () -> Void) {
        if agent.active === prompt { agent.active = nil }
        body()
        startNext(agent)
    }

    private func finish(_ prompt: Prompt, status: Status, _ end: AskEnd) {
        finish(prompt, .success(status), end)
    }

    /// Answers every waiter with the same outcome, once. A failure always ended
    /// the request otherwise than by an answer.
    private func finish(_ prompt: Prompt, _ outcome: Result<Status, BusError>, _ end: AskEnd) {
        guard !prompt.finished else { return }
        prompt.finished = true
        if open[prompt.key] === prompt { open[prompt.key] = nil }
        let waiters = prompt.waiters
        prompt.waiters = []
        let end: AskEnd = if case .failure = outcome { .ended } else { end }
        for waiter in waiters { waiter.done(outcome, end) }
    }

    /// A connection left the bus: its waits end, its agents go; a prompt nobody
    /// waits for any more is cancelled (the agent is told; its answer is dropped).
    func peerLeft(_ name: String) {
        _ = unregister(owner: name, path: nil)
        withdraw { $0.sender == name }
    }

    /// A handle was closed: its wait ends, and its prompt is cancelled if nobody
    /// else waits for it. Its `done` is not called.
    func close(handle: String) {
        withdraw { $0.handle == handle }
    }

    /// Drops the waiters `leaving` picks; each prompt left without a waiter is
    /// cancelled (the agent is told, its answer dropped; nothing is stored).
    private func withdraw(_ leaving: (_ waiter: (sender: String, handle: String?, done: AskDone)) -> Bool) {
        for prompt in Array(open.values) {
            let before = prompt.waiters.count
            prompt.waiters.removeAll(where: leaving)
            guard prompt.waiters.isEmpty, before > 0 else { continue }
            prompt.finished = true
            open[prompt.key] = nil
            for agent in agents {
                agent.queued.removeAll { $0 === prompt }
                if agent.active === prompt {
                    agent.active = nil
                    cancel(prompt, at: agent)
                    startNext(agent)
                }
            }
            logInfo("prompt \(prompt.id): every requester left or closed its request; cancelled, nothing stored")
        }
    }

    /// The daemon stops: agents are told to close their open prompts, queued ones
    /// are dropped, and no prompt starts from now on. Waiters are not called: the
    /// service has answered their calls (Cancelled), and a waiter's continuation
    /// (RequestMany's next permission) must not run.
    func shutdown() {
        stopped = true
        for agent in agents {
            if let prompt = agent.active {
                cancel(prompt, at: agent)
                logInfo("prompt \(prompt.id): cancelled, the service is stopping; nothing stored")
            }
            agent.active = nil
            agent.queued = []
        }
        for prompt in open.values {
            prompt.finished = true
            prompt.waiters = []
        }
        open = [:]
    }

    private func cancel(_ prompt: Prompt, at agent: Agent) {
        guard let message = try? Message.methodCall(destination: agent.owner, path: agent.path,
                                                    interface: BusNames.agentInterfaceName, member: "Cancel"),
              (try? message.append(.string(prompt.id))) != nil
        else { return }
        callAgent(agent, message, timeoutMilliseconds: 5000) { _ in }
    }
}

extension Result where Failure == PromptBroker.AnswerRefused {
    /// Why the reply was refused; nil if it was taken.
    var refusal: String? {
        if case .failure(let refused) = self { return refused.why }
        return nil
    }
}
