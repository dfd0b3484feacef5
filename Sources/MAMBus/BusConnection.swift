import CDBus
import Foundation

/// A private connection to a message bus (libdbus): connect and register, own a name, send
/// signals, call methods, subscribe and read. Thread-safe (one lock around every use); a
/// connection that dropped stays dropped (`isConnected` false, sends throw).
///
/// Private (`dbus_connection_open_private`), not libdbus' shared session connection, so
/// closing it never affects another user in the process, and a disconnect never exits the
/// process (libdbus' shared bus connections call `_exit` when the bus goes away).
public final class BusConnection: @unchecked Sendable {
    private let raw: OpaquePointer
    private let lock = NSLock()
    private var closed = false
    /// The address it was opened with.
    public let address: String
    /// Its unique name on the bus (":1.42").
    public let uniqueName: String

    /// Connects to the bus at `address` and registers (Hello).
    /// - Throws: `BusError` when the bus cannot be reached or refuses the connection.
    public init(address: String) throws {
        dbus_threads_init_default()
        let connection = try BusError.check { error in dbus_connection_open_private(address, error) }
        guard let connection else {
            throw BusError(name: "org.freedesktop.DBus.Error.Failed", message: "cannot connect to \(address)")
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        do {
            let registered = try BusError.check { error in dbus_bus_register(connection, error) }
            guard registered != 0 else { throw BusError(name: "org.freedesktop.DBus.Error.Failed", message: "Hello refused") }
        } catch {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw error
        }
        raw = connection
        self.address = address
        uniqueName = dbus_bus_get_unique_name(connection).map { String(cString: $0) } ?? ""
    }

    /// The session bus (`SessionBusAddress.resolve`), or nil when there is none.
    /// - Throws: `BusError` when there is an address but no bus answers on it.
    public static func session(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> BusConnection? {
        guard let address = SessionBusAddress.resolve(environment) else { return nil }
        return try BusConnection(address: address)
    }

    deinit { close() }

    /// Closes the connection (idempotent); the bus then releases its names.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        closed = true
        dbus_connection_close(raw)
        dbus_connection_unref(raw)
    }

    public var isConnected: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !closed && dbus_connection_get_is_connected(raw) != 0
    }

    /// What `requestName` got.
    public enum NameOwnership: Sendable, Equatable {
        /// This connection owns the name now.
        case owner
        /// Another connection owns it; this one waits in the bus's queue and becomes the owner
        /// when the other releases it (closes).
        case queued
        /// Another connection owns it and does not let it go (the bus refused to queue).
        case taken
    }

    /// Asks the bus for the well-known `name` (queued behind the current owner, if any).
    /// - Throws: `BusError` from the bus (e.g. the bus policy forbids owning the name).
    public func requestName(_ name: String) throws -> NameOwnership {
        try locked { raw in
            let reply = try BusError.check { error in dbus_bus_request_name(raw, name, 0, error) }
            switch reply {
            case mamfs_dbus_request_name_reply_primary_owner, mamfs_dbus_request_name_reply_already_owner: return .owner
            case mamfs_dbus_request_name_reply_in_queue: return .queued
            default: return .taken
            }
        }
    }

    /// Sends `message` (a signal, a reply, or a call whose reply is not read) and flushes it
    /// to the bus before returning.
    /// - Throws: `BusError` when the connection is gone or out of memory.
    public func send(_ message: BusMessage) throws {
        try locked { raw in
            guard dbus_connection_get_is_connected(raw) != 0 else {
                throw BusError(name: "org.freedesktop.DBus.Error.Disconnected", message: "the connection to the bus was lost")
            }
            guard dbus_connection_send(raw, message.raw, nil) != 0 else {
                throw BusError(name: "org.freedesktop.DBus.Error.NoMemory", message: "cannot queue the message")
            }
            dbus_connection_flush(raw)
        }
    }

    /// Calls a method and waits up to `timeout` seconds for its reply.
    /// - Returns: the method return.
    /// - Throws: `BusError` with the error reply's name (`...ServiceUnknown` when nobody owns
    ///   the destination), `...NoReply` after the timeout, `...Disconnected`.
    public func call(_ message: BusMessage, timeout: Double) throws -> BusMessage {
        try locked { raw in
            let reply = try BusError.check { error in
                dbus_connection_send_with_reply_and_block(raw, message.raw, Int32(max(1, timeout * 1000)), error)
            }
            guard let reply else { throw BusError(name: "org.freedesktop.DBus.Error.NoReply", message: "no reply") }
            return BusMessage(adopting: reply)
        }
    }

    /// Subscribes to the messages `rule` matches (a D-Bus match rule such as
    /// "type='signal',interface='org.mamfs.Mamfs1'"); waits for the bus to accept it, so a
    /// message sent after this returns is delivered.
    /// - Throws: `BusError` for a malformed rule or a lost connection.
    public func addMatch(_ rule: String) throws {
        try locked { raw in
            _ = try BusError.check { error in dbus_bus_add_match(raw, rule, error) }
        }
    }

    /// The next message that arrived, waiting up to `timeout` seconds for one.
    /// - Returns: nil when none came in time.
    /// - Throws: `BusError` (`...Disconnected`) when the connection was lost.
    public func nextMessage(timeout: Double) throws -> BusMessage? {
        try locked { raw in
            if let message = dbus_connection_pop_message(raw) { return BusMessage(adopting: message) }
            guard dbus_connection_read_write(raw, Int32(max(0, timeout * 1000))) != 0 else {
                throw BusError(name: "org.freedesktop.DBus.Error.Disconnected", message: "the connection to the bus was lost")
            }
            return dbus_connection_pop_message(raw).map { BusMessage(adopting: $0) }
        }
    }

    /// Reads and drops what has arrived without waiting (the bus's NameAcquired signals, calls
    /// nobody answers here), so a connection that only sends does not queue them for ever.
    /// Method calls get an UnknownMethod error reply.
    public func discardIncoming() {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        _ = dbus_connection_read_write(raw, 0)
        while let incoming = dbus_connection_pop_message(raw) {
            let message = BusMessage(adopting: incoming)
            if message.kind == .methodCall, message.expectsReply,
               let reply = try? message.errorReply(name: "org.freedesktop.DBus.Error.UnknownMethod",
                                                   text: "\(message.interface ?? "").\(message.member ?? "") is not served here") {
                dbus_connection_send(raw, reply.raw, nil)
            }
        }
        dbus_connection_flush(raw)
    }

    private func locked<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { throw BusError(name: "org.freedesktop.DBus.Error.Disconnected", message: "the connection is closed") }
        return try body(raw)
    }
}
