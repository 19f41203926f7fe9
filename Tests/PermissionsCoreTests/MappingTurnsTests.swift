import Testing
@testable import PermissionsPluginHost
import SystemPrimitives
import Glibc

/// The order loadAll's dlopens keep (MappingTurns): directory order, whatever order
/// the names come in, with a name that gives up early passing its turn, the turn
/// passed on whatever thread a dlopen returned on when that copy will serve, and
/// kept while a name falls back to its next copy.
struct MappingTurnsTests {
    /// A MappingTurns whose mappings write down their name's index (or `mark`), in
    /// the order they ran.
    private final class Recorded: Sendable {
        let turns = MappingTurns()
        private let log = Locked<[Int]>([])
        var ran: [Int] { log.withLock { $0 } }

        func map(_ index: Int, mark: Int? = nil) {
            turns.when(index) { [log] in log.withLock { $0.append(mark ?? index) } }
        }
    }

    @Test func mappingsRunInNameOrderWhateverOrderTheyCome() {
        let r = Recorded()
        // Name 2 is read first, then 1: neither maps before name 0 is over.
        r.map(2)
        r.map(1)
        #expect(r.ran == [])
        r.map(0)
        #expect(r.ran == [0])
        r.turns.over(0)
        #expect(r.ran == [0, 1])
        r.turns.over(1)
        #expect(r.ran == [0, 1, 2])
    }

    @Test func aNameThatGivesUpEarlyPassesItsTurnWhenItComes() {
        let r = Recorded()
        // Name 1 refused at reading, before name 0 mapped: name 2 waits for 0 only.
        r.turns.over(1)
        r.map(2)
        #expect(r.ran == [])
        r.map(0)
        r.turns.over(0)
        #expect(r.ran == [0, 2])
        // Passing a turn again (a name's later copy, or its end) changes nothing.
        r.turns.over(0)
        r.turns.over(1)
        r.map(3)
        #expect(r.ran == [0, 2])
        r.turns.over(2)
        #expect(r.ran == [0, 2, 3])
    }

    @Test func aLaterCopyOfANameWhoseTurnPassedMapsAtOnce() {
        let r = Recorded()
        r.map(0)
        r.turns.over(0)
        // Name 0's first copy mapped, then lost its claim: its next copy maps now.
        r.map(0, mark: 10)
        #expect(r.ran == [0, 10])
    }

    @Test func aCopyThatWillServePassesItsTurnWhenItsDlopenReturns() {
        let r = Recorded()
        r.map(1)
        r.map(2)
        r.map(0)
        r.turns.mapped(0, permissions: ["camera", "microphone"])
        #expect(r.ran == [0, 1])
        r.turns.mapped(1, permissions: ["location"])
        #expect(r.ran == [0, 1, 2])
    }

    /// A copy refused at opening, or claiming what a name before it claimed, falls
    /// back to its next copy: the name keeps its turn, so that copy maps before any
    /// later name (whose constructor might hold the loader's lock for good).
    @Test func aCopyThatWillNotServeKeepsTheTurnUntilTheNameClaimsOrGivesUp() {
        let r = Recorded()
        r.map(0)
        r.map(1)
        r.map(2)
        r.turns.mapped(0, permissions: ["camera"])
        #expect(r.ran == [0, 1])
        r.turns.mapped(1, permissions: nil)  // refused at opening
        r.turns.mapped(1, permissions: ["camera", "location"])  // its next copy clashes
        #expect(r.ran == [0, 1], "name 2 waits while name 1 falls back")
        r.turns.mapped(1, permissions: ["location"])  // a third copy that will serve
        #expect(r.ran == [0, 1, 2])

        // A name that claimed on the daemon queue counts for the clashes after it.
        let slow = Recorded()
        slow.map(0)
        slow.turns.mapped(0, permissions: nil)
        slow.turns.over(0, claiming: ["bluetooth"])
        slow.map(1)
        #expect(slow.ran == [0, 1])
        slow.map(2)
        slow.turns.mapped(1, permissions: ["bluetooth"])
        #expect(slow.ran == [0, 1])
        slow.turns.over(1)  // gave up
        #expect(slow.ran == [0, 1, 2])
    }

    @Test func theTurnPassesOnTheThreadWhereTheDlopenReturned() {
        let turns = MappingTurns()
        let mapped = Semaphore(value: 0)
        let passer = Locked<pthread_t?>(nil)
        let mapper = Locked<pthread_t?>(nil)
        turns.when(1) {
            mapper.withLock { $0 = pthread_self() }
            mapped.signal()
        }
        // Name 0's dlopen returns on its plugin's call queue, which passes the turn.
        let pluginQueue = Queue(label: "plugin-zero-call-queue")
        turns.when(0) {
            pluginQueue.async {
                passer.withLock { $0 = pthread_self() }
                turns.mapped(0, permissions: ["location"])
            }
        }
        #expect(mapped.wait(timeout: .now() + 10) == .success)
        let (passed, ranOn) = (passer.withLock { $0 }, mapper.withLock { $0 })
        #expect(passed != nil && ranOn != nil && pthread_equal(passed!, ranOn!) != 0)
    }
}
