/// The order in which loadAll's names claim their permissions: name `i` claims once
/// names `0..<i` have claimed or given up, however their reads and dlopens raced
/// (their dlopens keep an order of their own, MappingTurns). A name may give up
/// before its turn (every copy refused): its turn then passes at once. Confined to
/// the daemon queue.
final class ClaimTurns {
    /// The name whose turn it is.
    private var next = 0
    /// Names that claimed or gave up, from `next` on.
    private var over = Set<Int>()
    /// Claims that came before their turn, by name index.
    private var waiting: [Int: () -> Void] = [:]

    /// Runs `claim` now if it is name `index`'s turn, else once it is.
    func when(_ index: Int, _ claim: @escaping () -> Void) {
        if index == next { claim() } else { waiting[index] = claim }
    }

    /// Name `index` has claimed (or will not): its turn, when it comes, passes.
    func claimed(_ index: Int) {
        guard index >= next else { return }
        over.insert(index)
        while over.remove(next) != nil {
            next += 1
            if let claim = waiting.removeValue(forKey: next) {
                claim()
                return
            }
        }
    }
}
