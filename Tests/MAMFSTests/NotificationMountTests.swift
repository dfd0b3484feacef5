import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// A mount's session-bus side: AccessBlocked signals where a denial is recorded, the bus name,
/// `-o notify` desktop notifications, and a mount without a bus.
@Suite("Notifications: AccessBlocked, the bus name and -o notify from a mount")
struct NotificationMountTests {
    static func listen(_ bus: SessionBus, count: Int) throws -> BackgroundProcess {
        let events = try BackgroundProcess(MamfsBinary.path, ["events", "--json", "--count", String(count)],
                                           environment: testEnvironment(bus.environment))
        guard events.wait(until: { $0.err.contains("listening for org.mamfs.Mamfs1 signals") }) else {
            throw TestSupportError("mamfs events did not subscribe: \(events.err)")
        }
        return events
    }

    static func object(_ line: Substring) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
    }

    @Test("an unmanaged cat of a work file blocked by the policy is one AccessBlocked signal with its path and executable, scrubbed by the scrub list; the daemon owns org.mamfs.Mamfs1")
    func accessBlockedSignal() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let m = try MountedFixture(.managed, mountEnvironment: bus.environment)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let owner = try bus.ownerPID(of: "org.mamfs.Mamfs1")
        #expect(owner != nil && owner == m.daemonPID, "the daemon owns the bus name: \(String(describing: owner)) \(String(describing: m.daemonPID)) \((try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "")")
        let events = try Self.listen(bus, count: 2)
        defer { events.stop() }
        let cat = try m.sh(#"cat work.txt; echo "cat=$?""#)
        #expect(cat.out == "cat=1\n" && cat.err.contains("Permission denied"))
        // The scrub list hides a value in what is published from now on.
        try m.mamfs(["scrub", "work.txt"])
        usleep(300_000)
        let again = try m.sh(#"cat work.txt; echo "cat=$?""#)
        #expect(again.out == "cat=1\n")
        #expect(events.waitForExit(timeout: 20) == 0, "\(events.err)")
        let lines = events.out.split(separator: "\n").map(Self.object)
        #expect(lines.count == 2, "\(events.out)")
        guard let first = lines.first, let second = lines.last else { return }
        #expect(first["signal"] as? String == "AccessBlocked")
        #expect(first["accountId"] as? String == MountedFixture.account)
        #expect(first["path"] as? String == EnforcementMountTests.mountPath(m, "work.txt"))
        #expect(first["executable"] as? String == EnforcementMountTests.realPath("/bin/cat"))
        #expect(first["action"] as? String == "open-read" && first["rule"] as? String == "sendData=managedApps")
        #expect(first["statusCode"] as? Int == Int(EACCES) && first["status"] as? String == "EACCES")
        #expect(first["error"] as? String == "denied by policy (sendData=managedApps)")
        #expect(second["path"] as? String == EnforcementMountTests.mountPath(m, "[scrubbed]"), "\(second)")
        // The same denial is in the audit log.
        m.close()
        let denied = try EnforcementMountTests.records(m).filter { $0.decision == "denied" }
        #expect(denied.count >= 1 && denied.first?.path == EnforcementMountTests.mountPath(m, "work.txt"))
        #expect(try bus.ownerPID(of: "org.mamfs.Mamfs1") == nil, "the name is released when the mount stops")
    }

    @Test("two mounts on one bus: the first owns org.mamfs.Mamfs1, the second waits for it and takes it over when the first unmounts")
    func twoMountsShareTheName() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let first = try MountedFixture(.managed, mountEnvironment: bus.environment)
        defer { first.close() }
        let second = try MountedFixture(.unmanaged, mountEnvironment: bus.environment)
        defer { second.close() }
        #expect(first.daemonPID != nil && second.daemonPID != nil)
        #expect(try bus.ownerPID(of: "org.mamfs.Mamfs1") == first.daemonPID)
        first.close()
        var owner: pid_t?
        try Patience.waitUntil(10, every: 0.05) {
            owner = try bus.ownerPID(of: "org.mamfs.Mamfs1")
            return owner == second.daemonPID
        }
        #expect(owner == second.daemonPID, "\(String(describing: owner))")
        second.close()
        let log = (try? String(contentsOfFile: second.log, encoding: .utf8)) ?? ""
        #expect(log.contains("org.mamfs.Mamfs1 is owned by another connection (another mount)"), "\(log)")
    }

    @Test("-o notify: a blocked access calls org.freedesktop.Notifications.Notify naming the program and the file, once per file within the rate limit")
    func desktopNotification() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let server = try NotificationServer(address: bus.address)
        defer { server.stop() }
        let m = try MountedFixture(.managed, options: ["notify"], mountEnvironment: bus.environment)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let cat = try m.sh(#"cat work.txt; cat work.txt; echo "cat=$?""#)
        #expect(cat.out == "cat=1\n")
        Patience.waitUntil(10, every: 0.02) { !server.calls.isEmpty }
        usleep(500_000)
        let calls = server.calls
        #expect(calls.count == 1, "one notification for two denials of one file: \(calls)")
        #expect(calls.first?.appName == "mamfs")
        #expect(calls.first?.summary == "cat was blocked from opening work.txt", "\(String(describing: calls.first))")
        #expect(calls.first?.body.contains(EnforcementMountTests.mountPath(m, "work.txt")) == true)
    }

    @Test("a mount without a session bus (and -o notify) keeps enforcing, and a notify service that is not there never fails a request")
    func mountWithoutBus() throws {
        let runtime = try TempDirectory(prefix: "mamfs-nobus")
        let m = try MountedFixture(.managed, options: ["notify"],
                                   mountEnvironment: SessionBus.noBusEnvironment(runtimeDirectory: runtime.path))
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let cat = try m.sh(#"cat work.txt; echo "cat=$?"; "$BASE/bin/cat" work.txt"#)
        #expect(cat.out == "cat=1\nwork-secret", "\(cat.out) \(cat.err)")
        // A bus without a notification service: the Notify call fails and is logged.
        let bus = try SessionBus()
        defer { bus.stop() }
        let n = try MountedFixture(.managed, options: ["notify"], mountEnvironment: bus.environment)
        defer { n.close() }
        try EnforcementMountTests.prepare(n, level: "block")
        let blocked = try n.sh(#"cat work.txt; echo "cat=$?"; "$BASE/bin/cat" work.txt"#)
        #expect(blocked.out == "cat=1\nwork-secret", "\(blocked.out) \(blocked.err)")
        n.close()
        let log = (try? String(contentsOfFile: n.log, encoding: .utf8)) ?? ""
        #expect(log.contains("desktop notification about \(EnforcementMountTests.mountPath(n, "work.txt")) failed"), "\(log)")
    }
}
