/// The order in which loadAll's names open (dlopen and the claim of their
/// permissions): name `i` opens once names `0..<i` have opened or given up, however
/// their reads raced. A name may give up before its turn (every copy refused at
/// reading): its turn then passes at once. Confined to the daemon queue.
final class OpenTurns {
    /// The name whose turn it is.
    private var next = 0
    /// Names that opened or gave up, from `next` on.
    private var over = Set<Int>()
    /// Openings that came before their turn, by name index.
    private var waiting: [Int: () -> Void] = [:]

    /// Runs `open` now if it is name `index`'s turn, else once it is.
    func when(_ index: Int, _ open: @escaping () -> Void) {
        if index == next { open() } else { waiting[index] = open }
    }

    /// Name `index` has opened (or will not): its turn, when it comes, passes.
    func opened(_ index: Int) {
        guard index >= next else { return }
        over.insert(index)
        while over.remove(next) != nil {
            next += 1
            if let open = waiting.removeValue(forKey: next) {
                open()
                return
            }
        }
    }
}
