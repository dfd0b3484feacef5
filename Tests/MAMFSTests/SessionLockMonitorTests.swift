import Foundation
import Glibc
import MAMBus
import MAMTestSupport
import Testing

/// The session lock monitor against private buses: logind's session Lock/Unlock and the
/// screensaver's ActiveChanged from their owners are events, in order; the same signals from
/// anyone else (dbus-send, gdbus), for another session, or with the wrong arguments are not.
@Suite("Session lock: logind Lock/Unlock and ScreenSaver ActiveChanged, from the names' owners only")
struct SessionLockMonitorTests {
    static let session31 = "/org/freedesktop/login1/session/_31"

    /// What a monitor reported, collected from its threads.
    final class Recorder: @unchecked Sendable {
        private let lock = NSLock()
        private var eventList: [SessionLockEvent] = []
        private var debugList: [String] = []
        private var logList: [String] = []

        var events: [SessionLockEvent] { locked { eventList } }
        var debugLines: [String] { locked { debugList } }
        var logLines: [String] { locked { logList } }

        func monitor(_ environment: [String: String]) -> SessionLockMonitor {
            SessionLockMonitor(environment: environment,
                               log: { line in self.locked { self.logList.append(line) } },
                               debug: { line in self.locked { self.debugList.append(line) } },
                               onEvent: { event in self.locked { self.eventList.append(event) } })
        }

        /// Waits up to 5 s (nominal, stretched by `Patience`) until `condition` holds; returns
        /// whether it did.
        @discardableResult
        func wait(until condition: (Recorder) -> Bool) -> Bool {
            Patience.waitUntil(5, every: 0.01) { condition(self) }
        }

        /// Waits until `count` debug lines contain `text`.
        @discardableResult
        func waitForDebug(_ text: String, count: Int = 1) -> Bool {
            wait { $0.debugLines.filter { $0.contains(text) }.count >= count }
        }

        private func locked<T>(_ body: () -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body()
        }
    }

    /// An address where no bus answers, so the host's buses never take part in a test.
    static func nowhere(_ dir: TempDirectory) -> String { "unix:path=" + dir.file("no-bus") }

    /// A signal sent by a program that does not own the name, as any local client could.
    static func dbusSend(_ address: String, path: String, signal: String, _ arguments: [String] = []) throws {
        let sent = try runProcess("/usr/bin/dbus-send", ["--bus=" + address, "--type=signal", path, signal] + arguments,
                                  environment: testEnvironment(), timeout: 10)
        #expect(sent.status == 0, "dbus-send: \(sent.err)")
    }

    /// A test system bus with logind answering GetSessionByPID with `logindPath`, and a started
    /// monitor whose environment has XDG_SESSION_ID `sessionId` (nil: none); all stopped after `body`.
    static func withLogind(logindPath: String = session31, sessionId: String? = "1", sessionOfPID: Bool = true,
                           _ body: (SystemBus, FakeLogind, Recorder, SessionLockMonitor) throws -> Void) throws {
        let system = try SystemBus()
        defer { system.stop() }
        let logind = try FakeLogind(address: system.address, sessionPath: logindPath, sessionOfPID: sessionOfPID)
        defer { logind.stop() }
        let recorder = Recorder()
        let monitor = recorder.monitor(system.environment.merging(sessionId.map { ["XDG_SESSION_ID": $0] } ?? [:]) { $1 })
        monitor.start()
        defer { monitor.stop() }
        try body(system, logind, recorder, monitor)
    }

    /// A test system bus without logind and a started monitor with XDG_SESSION_ID=1; both
    /// stopped after `body`.
    static func withSystemMonitor(_ body: (SystemBus, Recorder, SessionLockMonitor) throws -> Void) throws {
        let system = try SystemBus()
        defer { system.stop() }
        let recorder = Recorder()
        let monitor = recorder.monitor(system.environment.merging(["XDG_SESSION_ID": "1"]) { $1 })
        monitor.start()
        defer { monitor.stop() }
        try body(system, recorder, monitor)
    }

    @Test("logind Lock then Unlock on the session of XDG_SESSION_ID=1 (/org/freedesktop/login1/session/_31) are locked, unlocked")
    func logindFromSessionId() throws {
        try Self.withLogind(logindPath: "/org/freedesktop/login1/session/other") { system, logind, recorder, monitor in
            #expect(monitor.sources == ["logind session \(Self.session31) on the system bus"])
            try logind.lock(sessionPath: Self.session31)
            try logind.unlock(sessionPath: Self.session31)
            recorder.wait { $0.events.count >= 2 }
            #expect(recorder.events == [.locked(source: "logind"), .unlocked(source: "logind")])
            #expect(logind.pidsAsked.isEmpty, "XDG_SESSION_ID names the session: logind is not asked")
        }
    }

    @Test("without XDG_SESSION_ID the session is logind's GetSessionByPID answer for this process")
    func logindSessionByPID() throws {
        let system = try SystemBus()
        defer { system.stop() }
        let path = "/org/freedesktop/login1/session/c7"
        let logind = try FakeLogind(address: system.address, sessionPath: path)
        defer { logind.stop() }
        let recorder = Recorder()
        let monitor = recorder.monitor(system.environment)
        monitor.start()
        defer { monitor.stop() }
        #expect(monitor.sources == ["logind session \(path) on the system bus"])
        #expect(logind.pidsAsked == [UInt32(getpid())])
        try logind.lock(sessionPath: Self.session31)
        try logind.lock(sessionPath: path)
        try logind.unlock(sessionPath: path)
        recorder.wait { $0.events.count >= 2 }
        #expect(recorder.events == [.locked(source: "logind"), .unlocked(source: "logind")])
    }

    @Test("without XDG_SESSION_ID and outside any session (a systemd user unit's daemon), the session of the process's user from ListSessions is heard")
    func logindUserSession() throws {
        let path = "/org/freedesktop/login1/session/_391"
        try Self.withLogind(logindPath: path, sessionId: nil, sessionOfPID: false) { _, logind, recorder, monitor in
            #expect(monitor.sources == ["logind session \(path) on the system bus"], "\(recorder.debugLines)")
            #expect(monitor.logindSession == path)
            try logind.lock(sessionPath: "/org/freedesktop/login1/session/_390")
            try logind.lock(sessionPath: path)
            recorder.wait { !$0.events.isEmpty }
            #expect(recorder.events == [.locked(source: "logind")], "another user's session is not ours")
        }
    }

    @Test("without XDG_SESSION_ID and without logind there is no logind source, one debug line")
    func noLogindSession() throws {
        let system = try SystemBus()
        defer { system.stop() }
        let recorder = Recorder()
        let monitor = recorder.monitor(system.environment)
        monitor.start()
        defer { monitor.stop() }
        #expect(monitor.sources.isEmpty)
        #expect(recorder.debugLines.filter { $0.contains("logind has no session for this process") }.count == 1, "\(recorder.debugLines)")
    }

    @Test("a Lock for another session is ignored; the session's own Unlock after it arrives alone")
    func otherSessionIgnored() throws {
        try Self.withLogind() { system, logind, recorder, monitor in
            try logind.lock(sessionPath: "/org/freedesktop/login1/session/_32")
            try logind.unlock(sessionPath: Self.session31)
            recorder.wait { !$0.events.isEmpty }
            #expect(recorder.events == [.unlocked(source: "logind")])
        }
    }

    @Test("a forged Lock from dbus-send and from gdbus (not the owner of org.freedesktop.login1) is ignored; logind's own Unlock still arrives")
    func forgedLogindSignal() throws {
        try Self.withLogind() { system, logind, recorder, monitor in
            let forged = "ignored forged org.freedesktop.login1.Session.Lock"
            try Self.dbusSend(system.address, path: Self.session31, signal: "org.freedesktop.login1.Session.Lock")
            #expect(recorder.waitForDebug(forged), "\(recorder.debugLines)")
            var expectedForged = 1
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/gdbus") {
                // `gdbus emit --address` sends before registering (Hello), so the bus drops the
                // signal; `--system` registers first.
                let sent = try runProcess("/usr/bin/gdbus", ["emit", "--system", "--object-path", Self.session31,
                                                             "--signal", "org.freedesktop.login1.Session.Lock"],
                                          environment: testEnvironment(system.environment), timeout: 10)
                #expect(sent.status == 0, "gdbus: \(sent.err)")
                expectedForged += 1
                #expect(recorder.waitForDebug(forged, count: expectedForged), "\(recorder.debugLines)")
            }
            try logind.unlock(sessionPath: Self.session31)
            recorder.wait { !$0.events.isEmpty }
            #expect(recorder.events == [.unlocked(source: "logind")])
            let lines = recorder.debugLines.filter { $0.contains(forged) }
            #expect(lines.count == expectedForged && lines.allSatisfy { $0.contains("org.freedesktop.login1 is owned by \(logind.uniqueName)") }, "\(lines)")
        }
    }

    @Test("a Lock while nobody owns org.freedesktop.login1 is ignored; once logind is there its Unlock arrives")
    func lockWithoutOwnerIgnored() throws {
        try Self.withSystemMonitor { system, recorder, _ in
            try Self.dbusSend(system.address, path: Self.session31, signal: "org.freedesktop.login1.Session.Lock")
            #expect(recorder.waitForDebug("nobody owns org.freedesktop.login1"), "\(recorder.debugLines)")
            let logind = try FakeLogind(address: system.address, sessionPath: Self.session31)
            defer { logind.stop() }
            try logind.unlock(sessionPath: Self.session31)
            recorder.wait { !$0.events.isEmpty }
            #expect(recorder.events == [.unlocked(source: "logind")])
        }
    }

    @Test("ScreenSaver ActiveChanged true then false from the name's owner is locked, unlocked; forged or malformed ones are not",
          arguments: [FakeScreenSaver.freedesktop, FakeScreenSaver.gnome])
    func screenSaver(interface: String) throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let saver = try FakeScreenSaver(address: bus.address, interface: interface)
        defer { saver.stop() }
        let recorder = Recorder()
        let monitor = recorder.monitor(bus.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": Self.nowhere(bus.directory)]) { $1 })
        monitor.start()
        defer { monitor.stop() }
        #expect(monitor.sources == ["org.freedesktop.ScreenSaver on the session bus", "org.gnome.ScreenSaver on the session bus"])
        try Self.dbusSend(bus.address, path: saver.path, signal: interface + ".ActiveChanged", ["boolean:true"])
        #expect(recorder.waitForDebug("ignored forged \(interface).ActiveChanged"), "\(recorder.debugLines)")
        try saver.emitActiveChanged([.string("true")])
        #expect(recorder.waitForDebug("signature 's' instead of 'b'"), "\(recorder.debugLines)")
        try saver.activeChanged(true)
        try saver.activeChanged(false)
        recorder.wait { $0.events.count >= 2 }
        #expect(recorder.events == [.locked(source: interface), .unlocked(source: interface)])
    }

    @Test("ActiveChanged on GNOME's interface from the owner of the freedesktop name is forged")
    func screenSaverOtherOwner() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let saver = try FakeScreenSaver(address: bus.address, interface: FakeScreenSaver.freedesktop)
        defer { saver.stop() }
        let sender = try BusConnection(address: bus.address)
        defer { sender.close() }
        #expect(try sender.requestName(FakeScreenSaver.freedesktop) == .queued)
        let recorder = Recorder()
        let monitor = recorder.monitor(bus.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": Self.nowhere(bus.directory)]) { $1 })
        monitor.start()
        defer { monitor.stop() }
        // In the queue for the name is not owning it.
        try sender.send(try BusMessage.signal(path: saver.path, interface: FakeScreenSaver.freedesktop, member: "ActiveChanged", arguments: [.bool(true)]))
        #expect(recorder.waitForDebug("is owned by \(saver.uniqueName)"), "\(recorder.debugLines)")
        try sender.send(try BusMessage.signal(path: "/org/gnome/ScreenSaver", interface: FakeScreenSaver.gnome, member: "ActiveChanged", arguments: [.bool(true)]))
        #expect(recorder.waitForDebug("nobody owns org.gnome.ScreenSaver"), "\(recorder.debugLines)")
        try saver.activeChanged(false)
        recorder.wait { !$0.events.isEmpty }
        #expect(recorder.events == [.unlocked(source: FakeScreenSaver.freedesktop)])
    }

    @Test("with no bus at all (empty environment, empty runtime directory) start and stop return and nothing is listened to")
    func noBuses() throws {
        let runtime = try TempDirectory(prefix: "mamfs-lock-runtime")
        let recorder = Recorder()
        let monitor = recorder.monitor(["XDG_RUNTIME_DIR": runtime.path])
        monitor.start()
        let sources = monitor.sources
        monitor.stop()
        monitor.stop()
        #expect(!sources.contains { $0.hasSuffix("on the session bus") })
        // A host with a system bus socket gives the monitor that bus; this test owns none.
        if SystemBusAddress.resolve([:]) == nil {
            #expect(sources.isEmpty)
            #expect(recorder.debugLines.contains { $0.contains("no system bus") }, "\(recorder.debugLines)")
        }
        #expect(recorder.debugLines.contains { $0.contains("no session bus") }, "\(recorder.debugLines)")
        #expect(recorder.events.isEmpty && recorder.logLines.isEmpty)
    }

    @Test("buses that cannot be reached are one debug line each and no source")
    func unreachableBuses() throws {
        let dir = try TempDirectory(prefix: "mamfs-lock")
        let recorder = Recorder()
        let monitor = recorder.monitor(["DBUS_SYSTEM_BUS_ADDRESS": Self.nowhere(dir), "DBUS_SESSION_BUS_ADDRESS": Self.nowhere(dir),
                                        "XDG_SESSION_ID": "1"])
        monitor.start()
        defer { monitor.stop() }
        #expect(monitor.sources.isEmpty)
        #expect(recorder.debugLines.filter { $0.contains("cannot connect to the system bus") }.count == 1, "\(recorder.debugLines)")
        #expect(recorder.debugLines.filter { $0.contains("cannot connect to the session bus") }.count == 1, "\(recorder.debugLines)")
        #expect(recorder.logLines.isEmpty)
    }

    @Test("a system bus that goes away is one log line and its source ends; stop still returns")
    func lostBus() throws {
        try Self.withSystemMonitor { system, recorder, monitor in
            #expect(monitor.sources.count == 1)
            system.stop()
            #expect(recorder.wait { !$0.logLines.isEmpty }, "no log line for the lost bus")
            #expect(recorder.logLines.count == 1 && recorder.logLines.first?.contains("lost the system bus") == true, "\(recorder.logLines)")
            #expect(recorder.wait { _ in monitor.sources.isEmpty })
        }
    }

    @Test("session ids are escaped as sd-bus escapes object path labels")
    func sessionPathEscaping() {
        let base = "/org/freedesktop/login1/session/"
        #expect(SessionLockMonitor.sessionPath(forSessionId: "1") == base + "_31")
        #expect(SessionLockMonitor.sessionPath(forSessionId: "12") == base + "_312")
        #expect(SessionLockMonitor.sessionPath(forSessionId: "c2") == base + "c2")
        #expect(SessionLockMonitor.sessionPath(forSessionId: "") == base + "_")
        #expect(SessionLockMonitor.sessionPath(forSessionId: "a.b-c_d") == base + "a_2eb_2dc_5fd")
        #expect(SessionLockMonitor.sessionPath(forSessionId: "é/") == base + "_c3_a9_2f")
        #expect(SessionLockMonitor.sessionPath(forSessionId: "Zz09") == base + "Zz09")
    }

    @Test("an object path argument that is not a D-Bus object path is refused before libdbus sees it")
    func malformedObjectPathRefused() {
        for bad in ["", "relative", "/trailing/", "/double//slash", "/dash-ed", "/nul\u{0}"] {
            #expect(throws: BusError.self, "\(bad)") {
                try BusMessage.signal(path: "/p", interface: "org.example.I", member: "M", arguments: [.objectPath(bad)])
            }
        }
        #expect((try? BusMessage.signal(path: "/p", interface: "org.example.I", member: "M", arguments: [.objectPath("/"), .bool(true)]))?.signature == "ob")
    }
}
