import Foundation
import Glibc
import MAMBus
import MAMTestSupport
import Testing

/// The session lock of a mount driven by the real signals: logind's `Lock`/`Unlock` on a test
/// system bus (a dbus-daemon of type system, `FakeLogind` owning org.freedesktop.login1) and the
/// screensaver's `ActiveChanged` on a test session bus, each also forged by `dbus-send` from a
/// connection that does not own the name, which must change nothing. `KeysDropped` is read with
/// `mamfs events` on the session bus.
@Suite("Session lock on a mount from logind and the screensaver")
struct SessionLockBusMountTests {
    static let sessionPath = "/org/freedesktop/login1/session/_31"

    /// `cat work.txt` through the mount until it gives `expected` (stdout, or "EACCES"), at
    /// most 5 s (nominal, stretched by `Patience`); the last answer.
    static func waitForRead(_ m: MountedFixture, _ expected: String) throws -> String {
        var last = ""
        try Patience.waitUntil(5, every: 0.05) {
            let result = try m.sh("cat work.txt")
            last = result.status == 0 ? result.out : (result.err.contains("Permission denied") ? "EACCES" : result.err)
            return last == expected
        }
        return last
    }

    static func listen(_ bus: SessionBus) throws -> BackgroundProcess {
        try NotificationMountTests.listen(bus, count: 1)
    }

    @Test("logind: Lock on the daemon's session closes the account's files and publishes KeysDropped; a forged Unlock (dbus-send, not the owner of org.freedesktop.login1) and a Lock of another session change nothing; the real Unlock opens them again")
    func logindLockAndUnlock() throws {
        let system = try SystemBus()
        defer { system.stop() }
        let session = try SessionBus()
        defer { session.stop() }
        let logind = try FakeLogind(address: system.address, sessionPath: Self.sessionPath)
        defer { logind.stop() }
        let environment = system.environment.merging(session.environment) { $1 }.merging(["XDG_SESSION_ID": "1"]) { $1 }
        let m = try SessionLockMountTests.mount("complete", environment: environment)
        defer { m.close() }
        let events = try Self.listen(session)
        defer { events.stop() }
        try logind.lock(sessionPath: "/org/freedesktop/login1/session/_32")
        usleep(500_000)
        #expect(try Self.waitForRead(m, "work-secret") == "work-secret", "another session's lock is not ours")
        try logind.lock(sessionPath: Self.sessionPath)
        #expect(try Self.waitForRead(m, "EACCES") == "EACCES")
        #expect(events.waitForExit(timeout: 10) == 0, "\(events.err)")
        let signal = NotificationMountTests.object(Substring(events.out.split(separator: "\n").first ?? ""))
        #expect(signal["signal"] as? String == "KeysDropped", "\(events.out)")
        #expect(signal["accountId"] as? String == MountedFixture.account)
        #expect(signal["reason"] as? String == "session locked (logind)", "\(signal)")
        let forged = try shell("dbus-send --system --type=signal \(Self.sessionPath) org.freedesktop.login1.Session.Unlock",
                               environment: system.environment)
        #expect(forged.status == 0, "\(forged.err)")
        usleep(700_000)
        #expect(try m.sh("cat work.txt").status != 0, "a forged Unlock gives no keys back")
        try logind.unlock(sessionPath: Self.sessionPath)
        #expect(try Self.waitForRead(m, "work-secret") == "work-secret")
        m.close()
        let log = SessionLockMountTests.log(m)
        #expect(log.contains("keys of \(MountedFixture.account) dropped: session locked (logind)"), "\(log)")
        #expect(log.contains("session unlocked (logind)"), "\(log)")
    }

    @Test("untilFirstUserAuth in a logind session (the daemon\'s own, or, outside one as in a systemd user unit, its user\'s): the login was the first authentication, so the files open from the start",
          arguments: [true, false])
    func untilFirstUserAuthInASession(ownSession: Bool) throws {
        let system = try SystemBus()
        defer { system.stop() }
        let logind = try FakeLogind(address: system.address, sessionPath: Self.sessionPath, sessionOfPID: ownSession)
        defer { logind.stop() }
        let m = try SessionLockMountTests.mount("untilFirstUserAuth", environment: system.environment.merging(["XDG_SESSION_ID": ""]) { $1 })
        defer { m.close() }
        let result = try m.sh(#"printf 'at-once' > first.txt && cat first.txt"#)
        #expect(result.out == "at-once", "\(result.out) \(result.err)")
        #expect(SessionLockMountTests.log(m).contains("untilFirstUserAuth: the mount runs in logind session \(Self.sessionPath)"), "\(SessionLockMountTests.log(m))")
        try logind.lock(sessionPath: Self.sessionPath)
        usleep(500_000)
        #expect(try m.sh("cat first.txt").out == "at-once", "untilFirstUserAuth: a later lock changes nothing")
    }

    @Test("the screensaver (org.gnome.ScreenSaver): ActiveChanged(true) locks, a forged ActiveChanged(false) is ignored, the owner's ActiveChanged(false) unlocks")
    func screensaverLockAndUnlock() throws {
        let session = try SessionBus()
        defer { session.stop() }
        let saver = try FakeScreenSaver(address: session.address, interface: FakeScreenSaver.gnome)
        defer { saver.stop() }
        let runtime = try TempDirectory(prefix: "mamfs-lockrt")
        let environment = session.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + runtime.file("none")]) { $1 }
        let m = try SessionLockMountTests.mount("completeUnlessOpen", environment: environment)
        defer { m.close() }
        try saver.activeChanged(true)
        #expect(try Self.waitForRead(m, "EACCES") == "EACCES")
        let forged = try shell("dbus-send --session --type=signal \(saver.path) \(FakeScreenSaver.gnome).ActiveChanged boolean:false",
                               environment: session.environment)
        #expect(forged.status == 0, "\(forged.err)")
        usleep(700_000)
        #expect(try m.sh("cat work.txt").status != 0, "a forged ActiveChanged(false) gives no keys back")
        try saver.activeChanged(false)
        #expect(try Self.waitForRead(m, "work-secret") == "work-secret")
        #expect(try m.sh("cat pers/mine.txt").out == "personal")
    }
}
