internal import SystemPrimitives
internal import PermissionsStore
internal import DBusKit

// Decisions with an end (an agent's answer may carry one): a timer armed for the
// next one, which removes it with the signals that implies. Part of
// PermissionsService; confined to its queue.
extension PermissionsService {
    /// Arms the timer for the next decision expiry (or disarms it).
    func scheduleExpiry() {
        // The removal running re-arms the timer when it ends, from memory as it is then.
        guard !expiring else { return }
        expiryTimer?.cancel()
        expiryTimer = nil
        guard let next = store.nextExpiry() else { return }
        let now = currentMicroseconds()
        let delay = next > now ? next - now : 0  // no subtraction that could overflow
        let timer = TimerSource(queue: connection.queue)
        timer.schedule(deadline: .now() + .microseconds(Int(min(delay, Int64(Int32.max)))))
        timer.setEventHandler { [unowned self] in self.expireDecisions() }
        timer.resume()
        expiryTimer = timer
    }

    /// Removes decisions whose time has come, with the signals that implies.
    package func expireDecisions() {
        // From this instant the row no longer counts, removed or not (a full disk
        // may fail the removal, which then signals nothing): connections follow now.
        recheckRemotes(permission: nil)
        // A removal already runs; its end arms the timer again (scheduleExpiry).
        guard !expiring else { return }
        expiring = true
        tracker.removeExpired { [weak self] removed in self?.expired(removed) }
    }

    private func expired(_ removed: Bool) {
        expiring = false
        guard removed else {
            // The row no longer applies either way; retry the clean-up later rather
            // than re-arming the timer for a time already past, which would spin.
            expiryTimer?.cancel()
            let retry = TimerSource(queue: connection.queue)
            retry.schedule(deadline: .now() + .seconds(60))
            retry.setEventHandler { [unowned self] in self.expireDecisions() }
            retry.resume()
            expiryTimer = retry
            return
        }
        scheduleExpiry()
    }
}
