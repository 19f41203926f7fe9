/// Carries a value that is only ever used on one serial queue across a `@Sendable`
/// boundary (`queue.async`, a dispatch source's handler).
/// `@unchecked Sendable`: whoever carries it runs it on that same queue, which
/// serialises every use, so no two threads touch it.
public struct QueueConfined<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
