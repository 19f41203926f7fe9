/// The order in which loadAll's names claim their permissions: name `i` claims once
/// names `0..<i` have claimed or given up, however their reads and dlopens raced
/// (their dlopens keep an order of their own, MappingTurns). A name may give up
/// before its turn (every copy refused): its turn then passes at once. Confined to
/// the daemon queue.
final class ClaimTurns {
    private var order = TurnOrder<() -> Void>()

    /// Runs `claim` now if it is name `index`'s turn, else once it is.
    func when(_ index: Int, _ claim: @escaping () -> Void) {
        order.take(index, claim)?()
    }

    /// Name `index` has claimed (or will not): its turn, when it comes, passes.
    func claimed(_ index: Int) {
        order.pass(index)?()
    }
}
