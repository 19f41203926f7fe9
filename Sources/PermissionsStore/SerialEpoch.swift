/// The serial epoch: the high 32 bits of every change serial (ChangeSerial, and the
/// serial of each StatusChanged, broadcast or in a subscriber's stream), taken once
/// per daemon start and kept in the store's meta table (key `serial-epoch`), so that
/// serials strictly increase across restarts with one write per start.
///
/// Its range is defined and every step is checked. An epoch is a `UInt32`; a start
/// moves on from the stored one, so a stored epoch outside `movable` (a hand edit,
/// another program's file) refuses the start with `SerialEpochError.outOfRange`,
/// quoting it: 9223372036854775807 plus one trapped, and 4294967295, one more and
/// shifted into the high bits, lost them (the serials began again at 0).
package enum SerialEpoch {
    /// The stored epochs a start can move on from: one more still fits in 32 bits.
    package static let movable: ClosedRange<Int64> = 0...(Int64(UInt32.max) - 1)

    /// The epoch of the start after one whose epoch was `stored` (0 for a new
    /// store): one more, or the clock's seconds when those are larger and in
    /// `movable`, so that a store started afresh (the one before it lost, or moved
    /// aside) still gives serials above those of earlier starts. A clock beyond the
    /// range (after 2106, or set wrong) is not taken: it would use the epochs up. A
    /// clock that went back changes nothing: the stored epoch leads. Nil when
    /// `stored` is outside `movable`.
    package static func next(after stored: Int64, clockSeconds: Int64) -> UInt32? {
        guard movable.contains(stored) else { return nil }
        let floor = movable.contains(clockSeconds) ? clockSeconds : 0
        return UInt32(max(stored + 1, floor))
    }

    /// The first serial of an epoch: the epoch in the high 32 bits, no change counted.
    package static func firstSerial(_ epoch: UInt32) -> UInt64 { UInt64(epoch) << 32 }
}

/// Why a start cannot have a serial epoch. Either refuses the start: serving with an
/// epoch that is not stored (the wall clock's, say) would repeat serials once the
/// clock went back, and clients take an equal or lower serial for no change missed.
package enum SerialEpochError: Error, Equatable, CustomStringConvertible {
    /// The epoch stored in the file (`path`) has no next one in range.
    case outOfRange(Int64, path: String)
    /// The new epoch could not be written to `path` (with SQLite's error).
    case notStored(UInt32, path: String, why: String)

    package var description: String {
        switch self {
        case .outOfRange(let value, let path):
            "serial epoch out of range: \(path) holds the serial epoch \(value) (meta key serial-epoch), expected "
                + "\(SerialEpoch.movable.lowerBound) to \(SerialEpoch.movable.upperBound) (one more must fit in the "
                + "high 32 bits of a change serial); left as it is. To recover, with the daemon stopped: sqlite3 "
                + "\(path) \"DELETE FROM meta WHERE key = 'serial-epoch'\" (the next start takes the clock's seconds)"
        case .notStored(let epoch, let path, let why):
            "serial epoch not stored: cannot store this start's serial epoch \(epoch) in \(path): \(why)"
        }
    }
}
