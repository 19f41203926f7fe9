import CDBus
import Glibc
import Testing
@testable import DBusKit

/// How the I/O thread turns poll's revents into libdbus's watch flags.
@Suite("I/O thread")
struct IOThreadTests {
    @Test func pollReportsBecomeWatchFlags() {
        #expect(IOThread.watchFlags(revents: Int16(POLLIN)) == DBUS_WATCH_READABLE.rawValue)
        #expect(IOThread.watchFlags(revents: Int16(POLLOUT)) == DBUS_WATCH_WRITABLE.rawValue)
        #expect(IOThread.watchFlags(revents: Int16(POLLHUP)) == DBUS_WATCH_HANGUP.rawValue)
        #expect(IOThread.watchFlags(revents: Int16(POLLERR)) == DBUS_WATCH_ERROR.rawValue)
        #expect(IOThread.watchFlags(revents: 0) == 0)
    }

    /// A descriptor closed under libdbus is an error for it to handle (it disconnects);
    /// mapped to nothing, every later poll would report it again at once: a spin.
    @Test func invalidDescriptorIsAnError() {
        #expect(IOThread.watchFlags(revents: Int16(POLLNVAL)) == DBUS_WATCH_ERROR.rawValue)
    }

    @Test func backoffDoublesToOneSecondAndSaysItOnce() {
        var backoff = PollBackoff()
        var said = [backoff.start()]
        var waits = [backoff.milliseconds]
        for _ in 0..<12 {
            said.append(backoff.start())
            waits.append(backoff.milliseconds)
        }
        #expect(said == [true] + Array(repeating: false, count: 12))
        #expect(waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000, 1000])
        backoff.reset()
        let saidAgain = backoff.start()
        #expect(saidAgain)
        #expect(backoff.milliseconds == 1)
    }
}
