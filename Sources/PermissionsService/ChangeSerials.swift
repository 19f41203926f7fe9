internal import PermissionsStore

/// The serials of one daemon start: ChangeSerial's sequence (the broadcast
/// StatusChanged) and one sequence per subscriber stream, each with the start's
/// serial epoch (SerialEpoch) in the high 32 bits and the changes it has told in the
/// low 32 bits.
///
/// Checked: a count never wraps to 0 nor carries into the epoch's bits (where it
/// would repeat the next start's serials). When a sequence has told its last count
/// (4 294 967 295 changes in one start), `next` first moves every sequence to a new
/// epoch, which the caller stores: each then jumps, which its listeners take for
/// missed changes, and re-read.
struct ChangeSerials {
    enum Sequence: Hashable {
        case broadcast
        case stream(Stream)
    }

    private(set) var epoch: UInt32
    private var counts: [Sequence: UInt32]

    init(epoch: UInt32, counts: [Sequence: UInt32] = [:]) {
        self.epoch = epoch
        self.counts = counts
    }

    /// The serial last told in `sequence` (the epoch's first serial before any):
    /// ChangeSerial for `.broadcast`, what Subscribe answers for a stream.
    func last(_ sequence: Sequence) -> UInt64 {
        SerialEpoch.firstSerial(epoch) | UInt64(counts[sequence] ?? 0)
    }

    /// Counts one change told in `sequence` and returns its serial. When the
    /// sequence's count is used up, every sequence first moves to the epoch
    /// `newEpoch` stored and returned (SerialEpoch.next; later than this one) and
    /// counts from 0 again; if it throws, nothing is counted and its error is thrown.
    mutating func next(_ sequence: Sequence, newEpoch: () throws -> UInt32) rethrows -> UInt64 {
        var told = counts[sequence] ?? 0
        if told == UInt32.max {
            let epoch = try newEpoch()
            precondition(epoch > self.epoch, "ChangeSerials: epoch \(epoch) is not after \(self.epoch)")
            self.epoch = epoch
            counts = [:]
            told = 0
        }
        counts[sequence] = told + 1
        return last(sequence)
    }
}
