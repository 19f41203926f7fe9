internal import SystemPrimitives
import Testing
import DBusKit
@testable import PermissionsModel
@testable import PermissionsStore
@testable import PermissionsService

/// The rule that lets users' decisions go (Residency) and the loads that bring
/// them back (UserLoads), on a clock moved by hand: a user nobody keeps goes after
/// the idle time and not before, one kept stays, and a read after that waits for
/// a load and finds the stored rows.
@Suite struct ResidencyTests {
    let queue = Queue(label: "residency-test")
    let clock = ManualClock()
    let store = InMemoryDecisionStore()
    let key = DecisionKey(uid: 4242, "org.example.Absent", "location")

    private func make(idle: Int = 300_000, sweep: Int = 60_000) -> (UserLoads, Residency) {
        let loads = UserLoads(store: store)
        let residency = Residency(store: store, loads: loads, idleMilliseconds: idle, sweepMilliseconds: sweep)
        queue.sync { residency.start(timers: clock, queue: queue) }
        return (loads, residency)
    }

    @Test func aUserNobodyKeepsGoesAfterTheIdleTimeAndComesBackWithTheirRows() throws {
        try store.set(key, decision: .denied, setBy: "test")
        let (loads, residency) = make()
        clock.advance(by: .seconds(5 * 60))
        #expect(queue.sync { store.isLoaded(uid: 4242) }, "first seen at the first look: 5 minutes from then")
        clock.advance(by: .seconds(60))
        #expect(queue.sync { !store.isLoaded(uid: 4242) })
        #expect(queue.sync { residency.evictions } == 1)
        #expect(queue.sync { store.decision(key) } == nil, "a read of a user not loaded finds nothing")
        var read: Decision?
        queue.sync {
            loads.whenLoaded(4242) { _ in read = store.decision(key)?.decision }
        }
        #expect(read == .denied)
        #expect(store.loads == 1)
    }

    @Test func aUserKeptStaysAndATouchPutsTheTimeOff() throws {
        try store.set(key, decision: .denied, setBy: "test")
        try store.set(DecisionKey(uid: 1000, "org.example.Here", "location"), decision: .denied, setBy: "test")
        let (_, residency) = make()
        queue.sync { residency.pinned = { $0 == 1000 } }
        clock.advance(by: .seconds(4 * 60))
        queue.sync { residency.touch(4242) }  // a call named them at 4 minutes
        clock.advance(by: .seconds(4 * 60))
        #expect(queue.sync { store.loadedUsers } == [1000, 4242])
        clock.advance(by: .seconds(60))
        #expect(queue.sync { store.loadedUsers } == [1000])
        clock.advance(by: .seconds(60 * 60))
        #expect(queue.sync { store.loadedUsers } == [1000])
    }

    /// A write in flight keeps its own user, not the others: a daemon written to
    /// without pause (one user's, or an admin's for one user) still lets the
    /// others go.
    @Test func aWriteInFlightKeepsItsUserAlone() throws {
        try store.set(key, decision: .denied, setBy: "test")
        try store.set(DecisionKey(uid: 1000, "org.example.Written", "location"), decision: .denied, setBy: "test")
        let (_, residency) = make()
        queue.sync { store.writingFor = [1000] }
        clock.advance(by: .seconds(6 * 60))
        #expect(queue.sync { store.loadedUsers } == [1000])
        #expect(queue.sync { residency.evictions } == 1)
        queue.sync { store.writingFor = [] }
        clock.advance(by: .seconds(4 * 60))
        #expect(queue.sync { store.loadedUsers } == [1000], "here while its write was in flight")
        clock.advance(by: .seconds(60))
        #expect(queue.sync { store.loadedUsers } == [])
    }

    @Test func aFailedLoadFailsThatUserAloneAndIsTriedAgain() throws {
        let loads = UserLoads(store: store)
        store.failLoads = [4242]
        var outcomes: [String] = []
        loads.whenLoaded(4242) { outcomes.append("4242: \((try? $0.get()) != nil)") }
        loads.whenLoaded(4343) { outcomes.append("4343: \((try? $0.get()) != nil)") }
        store.failLoads = []
        loads.whenLoaded(4242) { outcomes.append("4242: \((try? $0.get()) != nil)") }
        #expect(outcomes == ["4242: false", "4343: true", "4242: true"])
        #expect(loads.loadsFailed == 1)
    }

    /// The reset of a user whose load fails removes their rows and leaves them
    /// unloaded, as the daemon's store does: the next read still fails to load.
    @Test func aResetOfAUserWhoCannotBeLoadedLeavesThemUnloaded() throws {
        try store.set(DecisionKey(uid: 4242, "org.example.A", "location"), decision: .denied, setBy: "test")
        store.evict(uid: 4242)
        store.failLoads = [4242]
        var removed: Result<Int, any Error>?
        store.commit(.reset(uid: 4242, app: "org.example.A", permissions: ["location"])) { { removed = $0 } }
        #expect((try? removed?.get()) == 1)
        #expect(!store.isLoaded(uid: 4242))
        var loaded: Bool?
        store.load(uid: 4242) { loaded = (try? $0.get()) != nil }
        #expect(loaded == false)
        store.failLoads = []
        store.load(uid: 4242) { _ in }
        #expect(store.decision(DecisionKey(uid: 4242, "org.example.A", "location"), now: 0) == nil)
    }
}
