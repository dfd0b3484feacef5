import Foundation
import MAMBus

/// A test-owned logind on a (system) bus: it owns `org.freedesktop.login1`, answers
/// `org.freedesktop.login1.Manager.GetSessionByPID(u) -> o` with `sessionPath` for any pid, and
/// sends the session signals `org.freedesktop.login1.Session.Lock()` / `Unlock()` from the
/// owning connection, as systemd-logind does for `loginctl lock-session`.
public final class FakeLogind: @unchecked Sendable {
    public static let busName = "org.freedesktop.login1"
    public static let sessionInterface = "org.freedesktop.login1.Session"

    /// What `GetSessionByPID` answers.
    public let sessionPath: String
    private let service: BusServiceFixture
    private let asked: PIDList

    /// Connects to `address`, owns org.freedesktop.login1 and starts answering on a thread of
    /// its own.
    /// - Throws: `TestSupportError` when the name is taken; `BusError` when the bus cannot be
    ///   reached or refuses the name.
    /// - Parameter sessionOfPID: false makes `GetSessionByPID` fail as logind does for a process
    ///   outside any session (a systemd user unit's); `ListSessions` then names `sessionPath` as
    ///   a session of uid `sessionUID` on seat0, beside one of another user.
    public init(address: String, sessionPath: String, sessionOfPID: Bool = true, sessionUID: UInt32 = UInt32(geteuid())) throws {
        self.sessionPath = sessionPath
        let asked = PIDList()
        self.asked = asked
        service = try BusServiceFixture(address: address, name: Self.busName) { call in
            guard call.interface == "org.freedesktop.login1.Manager", call.path == "/org/freedesktop/login1" else { return nil }
            switch call.member {
            case "GetSessionByPID" where sessionOfPID && call.signature == "u":
                guard let pid = call.arguments.first?.uint32 else { return nil }
                asked.append(pid)
                return [.objectPath(sessionPath)]
            case "ListSessions" where call.signature == "":
                return [.structures(signature: "(susso)", [
                    [.string("90"), .uint32(sessionUID &+ 1), .string("other"), .string("seat0"), .objectPath("/org/freedesktop/login1/session/_390")],
                    [.string("91"), .uint32(sessionUID), .string("ann"), .string("seat0"), .objectPath(sessionPath)],
                ])]
            default:
                return nil
            }
        }
    }

    deinit { stop() }

    /// Its unique name on the bus (":1.3"), the sender of its signals.
    public var uniqueName: String { service.bus.uniqueName }

    /// The pids `GetSessionByPID` was asked about, in order.
    public var pidsAsked: [UInt32] { asked.values }

    /// Sends `Lock()` from the session object `sessionPath`.
    /// - Throws: `BusError` when the connection is gone.
    public func lock(sessionPath: String) throws {
        try service.emit(path: sessionPath, interface: Self.sessionInterface, member: "Lock", arguments: [])
    }

    /// Sends `Unlock()` from the session object `sessionPath`.
    /// - Throws: `BusError` when the connection is gone.
    public func unlock(sessionPath: String) throws {
        try service.emit(path: sessionPath, interface: Self.sessionInterface, member: "Unlock", arguments: [])
    }

    /// Stops answering and leaves the bus (releasing the name). Idempotent.
    public func stop() { service.stop() }

    /// The pids, appended from the serving thread and read from the test's.
    private final class PIDList: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [UInt32] = []

        func append(_ pid: UInt32) {
            lock.lock()
            list.append(pid)
            lock.unlock()
        }

        var values: [UInt32] {
            lock.lock()
            defer { lock.unlock() }
            return list
        }
    }
}
