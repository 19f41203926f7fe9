import Testing
@testable import PermissionsPluginHost
import SystemPrimitives

/// A call made ahead (AheadCall): its outcome is taken once, whichever of the call
/// queue's `finished` and the daemon queue's `take` comes first.
struct AheadCallTests {
    @Test func anOutcomeThatCameFirstIsTakenAsItIs() {
        let call = AheadCall<Int>()
        call.finished(.returned(7))
        let later = Locked<[Int]>([])
        let outcome = call.take { outcome in
            if case .returned(let value) = outcome { later.withLock { $0.append(value) } }
        }
        guard case .returned(7)? = outcome else {
            Issue.record("took \(String(describing: outcome))")
            return
        }
        #expect(later.withLock { $0 } == [])
    }

    @Test func anOutcomeThatComesLaterGoesToTheOneWaiting() {
        let call = AheadCall<Int>()
        let later = Locked<[Int]>([])
        let outcome = call.take { outcome in
            if case .returned(let value) = outcome { later.withLock { $0.append(value) } }
        }
        #expect(outcome == nil)
        call.finished(.returned(7))
        #expect(later.withLock { $0 } == [7])
    }

    @Test func aSkipIsSaidLikeAnOutcome() {
        let call = AheadCall<Int>()
        call.finished(.skipped)
        guard case .skipped? = call.take(orLater: { _ in Issue.record("handed over later") }) else {
            Issue.record("not said as skipped")
            return
        }
    }
}
