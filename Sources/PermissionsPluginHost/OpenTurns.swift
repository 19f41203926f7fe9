/// The order in which loadAll's names open (dlopen and the claim of their
/// permissions): name `i` opens once names `0..<i` have opened or given up, however
/// their reads raced. Confined to the daemon queue.
final class OpenTurns {
    /// The name whose turn it is.
    private var next = 0
    /// Openings that came before their turn, by name index.
    private var waiting: [Int: () -> Void] = [:]

    /// Runs `open` now if it is name `index`'s turn, else once it is.
    func when(_ index: Int, _ open: @escaping () -> Void) {
        if index == next { open() } else { waiting[index] = open }
    }

    /// Name `index` has opened (or will not): the next one's turn.
    func opened(_ index: Int) {
        guard index == next else { return }
        next += 1
        waiting.removeValue(forKey: next)?()
    }
}
