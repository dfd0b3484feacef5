import Foundation
import Glibc

/// Reports when the desktop session is locked and unlocked, so the mount daemon can drop keys
/// while the screen is locked.
///
/// Two references are listened to, each on its own connection and thread:
/// - logind (system bus): the signals `Lock()` and `Unlock()` of interface
///   `org.freedesktop.login1.Session` on this session's object path only (the path from
///   `XDG_SESSION_ID`, else `org.freedesktop.login1.Manager.GetSessionByPID(u) -> o` for this
///   process), as `loginctl lock-session` and the desktop's lock screen send them.
/// - the screensaver (session bus): `ActiveChanged(b active)` of `org.freedesktop.ScreenSaver`
///   (the freedesktop ScreenSaver specification: KDE, Xfce) and of `org.gnome.ScreenSaver`
///   (GNOME); `true` is `.locked`, `false` `.unlocked`.
///
/// A signal counts only when its sender is, when it is read, the owner of the well-known name
/// behind it (`org.freedesktop.login1`, `org.freedesktop.ScreenSaver`, `org.gnome.ScreenSaver`:
/// `org.freedesktop.DBus.GetNameOwner`), because any client may send any signal. A forged or
/// malformed signal (wrong signature) is one `debug` line and no event.
///
/// `onEvent` is called on the listening thread of the bus the signal came from, in the order the
/// bus delivered them; events are not deduplicated (logind and the screensaver may both report
/// one lock). A bus that goes away is one `log` line and its sources end (no reconnection).
public final class SessionLockMonitor: @unchecked Sendable {
    private let environment: [String: String]
    private let log: @Sendable (String) -> Void
    private let debug: @Sendable (String) -> Void
    private let onEvent: @Sendable (SessionLockEvent) -> Void
    /// Held across `start`, so `stop` and `sources` see its listeners complete.
    private let lock = NSLock()
    private var started = false
    private var listeners: [LockSignalListener] = []

    /// - Parameters:
    ///   - environment: where `DBUS_SYSTEM_BUS_ADDRESS`, `DBUS_SESSION_BUS_ADDRESS`,
    ///     `XDG_RUNTIME_DIR` and `XDG_SESSION_ID` are read (callers pass the process's).
    ///   - log: a bus lost after `start`, one line.
    ///   - debug: a bus that is missing or cannot be reached, no logind session, an ignored
    ///     (forged or malformed) signal; one line each.
    ///   - onEvent: each lock and unlock, on a listening thread.
    public init(environment: [String: String], log: @escaping @Sendable (String) -> Void,
                debug: @escaping @Sendable (String) -> Void,
                onEvent: @escaping @Sendable (SessionLockEvent) -> Void) {
        self.environment = environment
        self.log = log
        self.debug = debug
        self.onEvent = onEvent
    }

    deinit { stop() }

    /// Connects to the buses there are and subscribes; returns once every subscription is in
    /// place, so a signal sent after it returns is seen. Never throws: a missing or unreachable
    /// bus (or no logind session) is one `debug` line and that source is not used. Only the
    /// first call does anything.
    public func start() {
        lock.lock()
        defer { lock.unlock() }
        guard !started else { return }
        started = true
        listeners = [startLogind(), startScreenSaver()].compactMap { $0 }
    }

    /// Ends the listening threads (each within about 0.2 s, the length of one read) and closes
    /// the connections; returns when the threads are gone. Idempotent. Called from `onEvent` it
    /// does not wait for the thread it runs on.
    public func stop() {
        // Not under `lock`: an `onEvent` that reads `sources` while this waits for its thread
        // would otherwise never return.
        lock.lock()
        let running = listeners
        lock.unlock()
        for listener in running { listener.stop() }
    }

    /// What is listened to, one line each ("logind session /org/freedesktop/login1/session/_31
    /// on the system bus", "org.freedesktop.ScreenSaver on the session bus"); empty before
    /// `start`, after `stop`, and when there is nothing to listen to. A lost bus's lines go.
    public var sources: [String] {
        lock.lock()
        defer { lock.unlock() }
        return listeners.filter(\.isListening).flatMap { listener in
            listener.sources.map { "\($0.summary) on the \(listener.busName)" }
        }
    }

    /// The logind session listened to (its object path), nil when logind is not heard: no
    /// system bus, no XDG_SESSION_ID and no session of logind's for this process. A process with
    /// a session runs in a user's login, so the user has authenticated since boot.
    public var logindSession: String? {
        lock.lock()
        defer { lock.unlock() }
        for listener in listeners where listener.isListening {
            if let source = listener.sources.first(where: { $0.ownerName == "org.freedesktop.login1" }) { return source.path }
        }
        return nil
    }

    /// The object path logind gives the session `id`: `/org/freedesktop/login1/session/` and the
    /// id escaped as sd-bus escapes an object path label (`sd_bus_path_encode`): every byte but
    /// [A-Za-z0-9], and a leading digit, becomes `_` and two lowercase hex digits; an empty id
    /// is `_`. "1" -> `.../session/_31`, "c2" -> `.../session/c2`.
    public static func sessionPath(forSessionId id: String) -> String {
        "/org/freedesktop/login1/session/" + escapedLabel(id)
    }

    static func escapedLabel(_ label: String) -> String {
        guard !label.isEmpty else { return "_" }
        var result = ""
        for (index, byte) in label.utf8.enumerated() {
            let letter = (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            let digit = byte >= 0x30 && byte <= 0x39
            if letter || (digit && index > 0) {
                result.append(Character(Unicode.Scalar(byte)))
            } else {
                let hex = String(byte, radix: 16, uppercase: false)
                result += "_" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return result
    }

    private func startLogind() -> LockSignalListener? {
        let unused = "logind Lock/Unlock are not heard"
        guard let address = SystemBusAddress.resolve(environment) else {
            debug("session lock: \(SystemBusAddress.missingReason): \(unused)")
            return nil
        }
        guard let bus = connect(address, busName: "system bus", unused: unused) else { return nil }
        guard let path = sessionPath(asking: bus, unused: unused) else {
            bus.close()
            return nil
        }
        return listen(bus, busName: "system bus", sources: [.logind(sessionPath: path)])
    }

    private func startScreenSaver() -> LockSignalListener? {
        let unused = "screensaver ActiveChanged is not heard"
        guard let address = SessionBusAddress.resolve(environment) else {
            debug("session lock: \(SessionBusAddress.missingReason): \(unused)")
            return nil
        }
        guard let bus = connect(address, busName: "session bus", unused: unused) else { return nil }
        return listen(bus, busName: "session bus", sources: LockSignalSource.screenSaverInterfaces.map(LockSignalSource.screenSaver))
    }

    private func connect(_ address: String, busName: String, unused: String) -> BusConnection? {
        do {
            return try BusConnection(address: address)
        } catch {
            debug("session lock: cannot connect to the \(busName) at \(address) (\(error)): \(unused)")
            return nil
        }
    }

    /// This session's logind object path: from XDG_SESSION_ID, else logind's answer for our pid
    /// (a daemon started outside the session's environment still belongs to its session).
    private func sessionPath(asking bus: BusConnection, unused: String) -> String? {
        if let id = environment["XDG_SESSION_ID"], !id.isEmpty { return Self.sessionPath(forSessionId: id) }
        do {
            let call = try BusMessage.methodCall(destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
                                                 interface: "org.freedesktop.login1.Manager", member: "GetSessionByPID",
                                                 arguments: [.uint32(UInt32(bitPattern: getpid()))])
            let reply = try bus.call(call, timeout: 2)
            guard reply.signature == "o", let path = reply.arguments.first?.objectPath else {
                debug("session lock: logind's GetSessionByPID returned '\(reply.signature)' instead of an object path: \(unused)")
                return nil
            }
            return path
        } catch {
            if let path = userSession(asking: bus) {
                debug("session lock: XDG_SESSION_ID is not set and logind has no session for this process (\(error)); listening to the session of uid \(geteuid()): \(path)")
                return path
            }
            debug("session lock: XDG_SESSION_ID is not set and logind has no session for this process or its user (\(error)): \(unused)")
            return nil
        }
    }

    /// A session of this process's user from logind's `ListSessions` (`a(susso)`: id, uid, user,
    /// seat, path), one on a seat first: a daemon of a systemd user unit runs outside the login
    /// session, but its user's session is the one whose lock counts.
    private func userSession(asking bus: BusConnection) -> String? {
        guard let call = try? BusMessage.methodCall(destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
                                                    interface: "org.freedesktop.login1.Manager", member: "ListSessions", arguments: []),
              let reply = try? bus.call(call, timeout: 2), reply.signature == "a(susso)",
              let rows = reply.arguments.first?.structures else { return nil }
        let mine = rows.filter { $0.count == 5 && $0[1].uint32 == geteuid() }
        let seated = mine.first { !($0[3].string ?? "").isEmpty }
        return (seated ?? mine.first)?[4].objectPath
    }

    private func listen(_ bus: BusConnection, busName: String, sources: [LockSignalSource]) -> LockSignalListener? {
        do {
            for source in sources { try bus.addMatch(source.matchRule) }
        } catch {
            debug("session lock: the \(busName) refused the subscription (\(error)): \(sources.map(\.summary).joined(separator: ", ")) not heard")
            bus.close()
            return nil
        }
        let listener = LockSignalListener(bus: bus, busName: busName, sources: sources, log: log, debug: debug, onEvent: onEvent)
        listener.start()
        return listener
    }
}
