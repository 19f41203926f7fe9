internal import SystemPrimitives

/// A plugin call made on its call queue before the daemon queue asks for it:
/// a loading copy's init (as soon as its dlopen returned), validate and configure
/// (each straight after the step before it returned), in PluginResolution,
/// instead of after the step before's result has gone to the daemon queue and
/// the next call has come back. On a busy 2-core machine each of those
/// hand-overs woke a thread, 0.1 to 0.7 ms, six of them for the last plugin to
/// start, which start-up waits for (doc/performance.md).
///
/// The daemon queue still looks at each result in turn, as it did (a step's
/// refusal still stops the steps after it from counting), and gives each step its
/// deadline from when it asks: `PluginHost.call(_:_:ahead:orRun:then:timedOut:)`
/// takes the result if it is there, or waits for it.
///
/// A step runs ahead only when the step before it went well, the configuration
/// is still the one it was given (`PluginHost.generationNow`), and the plugin still
/// takes calls (init returned 0, fini has not run, it was not given up:
/// `LoadedPlugin.takesCalls`, read on its call queue); otherwise it is `skipped`
/// (the daemon queue makes the call itself if it still wants it) or `closed` (it
/// is never made), said before the result of the step before it is handed over,
/// so the daemon queue never waits for a step that will not come.
///
/// Used from the plugin's call queue (`finished`) and the daemon queue (`take`):
/// its state is behind a lock, and the work it holds runs outside it.
final class AheadCall<R: Sendable>: Sendable {
    enum Outcome: Sendable {
        /// It ran, and returned this.
        case returned(R)
        /// It did not run (see the type's comment): made by the daemon queue if it
        /// still wants it.
        case skipped
        /// It did not run because the plugin no longer takes calls: not made at all
        /// (the plugin is given up, `PluginHost.call(_:_:ahead:orRun:then:timedOut:)`).
        case closed
    }

    private struct State: Sendable {
        var outcome: Outcome?
        var waiting: (@Sendable (Outcome) -> Void)?
    }

    private let state = Locked(State())

    /// On the call queue: the call returned (or was skipped). Hands the outcome to
    /// the one waiting for it, if any, else keeps it for `take`.
    func finished(_ outcome: Outcome) {
        let waiting = state.withLock { state -> (@Sendable (Outcome) -> Void)? in
            guard let waiting = state.waiting else {
                state.outcome = outcome
                return nil
            }
            state.waiting = nil
            return waiting
        }
        waiting?(outcome)
    }

    /// It was said skipped (any thread).
    var skipped: Bool {
        state.withLock { state in
            if case .skipped? = state.outcome { return true }
            return false
        }
    }

    /// The outcome, if it came; else nil, and `later` gets it when it comes, on
    /// the call queue.
    func take(orLater later: @escaping @Sendable (Outcome) -> Void) -> Outcome? {
        state.withLock { state in
            if let outcome = state.outcome { return outcome }
            state.waiting = later
            return nil
        }
    }
}

extension AheadCall.Outcome {
    /// The same reason for a step not made, for a step of another result type.
    func notMade<T>() -> AheadCall<T>.Outcome {
        if case .closed = self { return .closed }
        return .skipped
    }
}
