/// Turns taken in index order, whatever order the work for them comes in: the
/// bookkeeping ClaimTurns and MappingTurns share. A turn is passed once its index
/// is done; an index done before its turn (a name that gave up early) passes at
/// once when the turn reaches it. Holds no lock: its owner says where it is used.
struct TurnOrder<Work> {
    /// The index whose turn it is.
    private(set) var next = 0
    /// Indices done with their turn, from `next` on.
    private var over = Set<Int>()
    /// Work that came before its turn, by index.
    private var waiting: [Int: Work] = [:]

    /// `work`, to run now, if `index`'s turn has come (or passed); else nil, and it
    /// is kept for that turn.
    mutating func take(_ index: Int, _ work: Work) -> Work? {
        if index <= next { return work }
        waiting[index] = work
        return nil
    }

    /// `index` is done: the turn moves on past every index done, and the work
    /// waiting for the new turn, if any, comes back to run. Nothing for a turn
    /// passed already.
    mutating func pass(_ index: Int) -> Work? {
        guard index >= next else { return nil }
        over.insert(index)
        while over.remove(next) != nil {
            next += 1
            if let work = waiting.removeValue(forKey: next) { return work }
        }
        return nil
    }
}

extension TurnOrder: Sendable where Work: Sendable {}
