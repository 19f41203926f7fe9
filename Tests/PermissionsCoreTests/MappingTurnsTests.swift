import Testing
@testable import PermissionsPluginHost
import SystemPrimitives
import Glibc

/// The order loadAll's dlopens keep (MappingTurns): directory order, whatever order
/// the names come in, with a name that gives up early passing its turn, the turn
/// passed on whatever thread a dlopen returned on when that copy will serve, and
/// kept while a name falls back to its next copy.
struct MappingTurnsTests {
    @Test func mappingsRunInNameOrderWhateverOrderTheyCome() {
        let turns = MappingTurns()
        let ran = Locked<[Int]>([])
        // Name 2 is read first, then 1: neither maps before name 0 is over.
        turns.when(2) { ran.withLock { $0.append(2) } }
        turns.when(1) { ran.withLock { $0.append(1) } }
        #expect(ran.withLock { $0 } == [])
        turns.when(0) { ran.withLock { $0.append(0) } }
        #expect(ran.withLock { $0 } == [0])
        turns.over(0)
        #expect(ran.withLock { $0 } == [0, 1])
        turns.over(1)
        #expect(ran.withLock { $0 } == [0, 1, 2])
    }

    @Test func aNameThatGivesUpEarlyPassesItsTurnWhenItComes() {
        let turns = MappingTurns()
        let ran = Locked<[Int]>([])
        // Name 1 refused at reading, before name 0 mapped: name 2 waits for 0 only.
        turns.over(1)
        turns.when(2) { ran.withLock { $0.append(2) } }
        #expect(ran.withLock { $0 } == [])
        turns.when(0) { ran.withLock { $0.append(0) } }
        turns.over(0)
        #expect(ran.withLock { $0 } == [0, 2])
        // Passing a turn again (a name's later copy, or its end) changes nothing.
        turns.over(0)
        turns.over(1)
        turns.when(3) { ran.withLock { $0.append(3) } }
        #expect(ran.withLock { $0 } == [0, 2])
        turns.over(2)
        #expect(ran.withLock { $0 } == [0, 2, 3])
    }

    @Test func aLaterCopyOfANameWhoseTurnPassedMapsAtOnce() {
        let turns = MappingTurns()
        let ran = Locked<[Int]>([])
        turns.when(0) { ran.withLock { $0.append(0) } }
        turns.over(0)
        // Name 0's first copy mapped, then lost its claim: its next copy maps now.
        turns.when(0) { ran.withLock { $0.append(10) } }
        #expect(ran.withLock { $0 } == [0, 10])
    }

    @Test func aCopyThatWillServePassesItsTurnWhenItsDlopenReturns() {
        let turns = MappingTurns()
        let ran = Locked<[Int]>([])
        turns.when(1) { ran.withLock { $0.append(1) } }
        turns.when(2) { ran.withLock { $0.append(2) } }
        turns.when(0) { ran.withLock { $0.append(0) } }
        turns.mapped(0, permissions: ["camera", "microphone"])
        #expect(ran.withLock { $0 } == [0, 1])
        turns.mapped(1, permissions: ["location"])
        #expect(ran.withLock { $0 } == [0, 1, 2])
    }

    /// A copy refused at opening, or claiming what a name before it claimed, falls
    /// back to its next copy: the name keeps its turn, so that copy maps before any
    /// later name (whose constructor might hold the loader's lock for good).
    @Test func aCopyThatWillNotServeKeepsTheTurnUntilTheNameClaimsOrGivesUp() {
        let turns = MappingTurns()
        let ran = Locked<[Int]>([])
        turns.when(0) { ran.withLock { $0.append(0) } }
        turns.when(1) { ran.withLock { $0.append(1) } }
        turns.when(2) { ran.withLock { $0.append(2) } }
        turns.mapped(0, permissions: ["camera"])
        #expect(ran.withLock { $0 } == [0, 1])
        turns.mapped(1, permissions: nil)  // refused at opening
        turns.mapped(1, permissions: ["camera", "location"])  // its next copy clashes
        #expect(ran.withLock { $0 } == [0, 1], "name 2 waits while name 1 falls back")
        turns.mapped(1, permissions: ["location"])  // a third copy that will serve
        #expect(ran.withLock { $0 } == [0, 1, 2])

        // A name that claimed on the daemon queue counts for the clashes after it.
        let slow = MappingTurns()
        slow.when(0) {}
        slow.mapped(0, permissions: nil)
        slow.over(0, claiming: ["bluetooth"])
        let mappedNext = Locked(false)
        slow.when(1) { mappedNext.withLock { $0 = true } }
        #expect(mappedNext.withLock { $0 })
        slow.when(2) { ran.withLock { $0.append(20) } }
        slow.mapped(1, permissions: ["bluetooth"])
        #expect(!ran.withLock { $0 }.contains(20))
        slow.over(1)  // gave up
        #expect(ran.withLock { $0 }.contains(20))
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
