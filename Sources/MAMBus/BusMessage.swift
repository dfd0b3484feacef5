import CDBus

/// A D-Bus message (owning one libdbus reference): a signal or method call to send, or a
/// message received. Not thread-safe; hand it from thread to thread, not to two at once.
public final class BusMessage: @unchecked Sendable {
    /// The kinds of message.
    public enum Kind: Sendable, Equatable {
        case methodCall, methodReturn, error, signal, other
    }

    let raw: OpaquePointer

    /// Adopts one reference to `raw`.
    init(adopting raw: OpaquePointer) {
        self.raw = raw
    }

    deinit { dbus_message_unref(raw) }

    /// A signal `interface.member` from the object `path` with `arguments`.
    /// - Throws: `BusError` when libdbus refuses the names (malformed) or runs out of memory.
    public static func signal(path: String, interface: String, member: String, arguments: [BusValue]) throws -> BusMessage {
        guard let raw = dbus_message_new_signal(path, interface, member) else {
            throw BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "cannot make the signal \(interface).\(member)")
        }
        let message = BusMessage(adopting: raw)
        try message.append(arguments)
        return message
    }

    /// A method call `interface.member` on `path` of `destination` with `arguments`.
    /// - Throws: `BusError` as `signal`.
    public static func methodCall(destination: String, path: String, interface: String, member: String,
                                  arguments: [BusValue]) throws -> BusMessage {
        guard let raw = dbus_message_new_method_call(destination, path, interface, member) else {
            throw BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "cannot make the call \(interface).\(member)")
        }
        let message = BusMessage(adopting: raw)
        try message.append(arguments)
        return message
    }

    /// The reply to this method call carrying `arguments`.
    public func methodReturn(_ arguments: [BusValue]) throws -> BusMessage {
        guard let raw = dbus_message_new_method_return(raw) else {
            throw BusError(name: "org.freedesktop.DBus.Error.NoMemory", message: "cannot make a reply")
        }
        let reply = BusMessage(adopting: raw)
        try reply.append(arguments)
        return reply
    }

    /// The error reply `name` with `text` to this method call.
    public func errorReply(name: String, text: String) throws -> BusMessage {
        guard let raw = dbus_message_new_error(raw, name, text) else {
            throw BusError(name: "org.freedesktop.DBus.Error.NoMemory", message: "cannot make an error reply")
        }
        return BusMessage(adopting: raw)
    }

    public var kind: Kind {
        switch dbus_message_get_type(raw) {
        case mamfs_dbus_message_type_method_call: return .methodCall
        case mamfs_dbus_message_type_method_return: return .methodReturn
        case mamfs_dbus_message_type_error: return .error
        case mamfs_dbus_message_type_signal: return .signal
        default: return .other
        }
    }

    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    public var path: String? { dbus_message_get_path(raw).map { String(cString: $0) } }
    /// The unique name of the connection that sent it (":1.42").
    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    /// The error name of an error reply.
    public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    /// The message's D-Bus signature ("ssus").
    public var signature: String { dbus_message_get_signature(raw).map { String(cString: $0) } ?? "" }

    /// Whether the caller of this method call asked for no reply.
    public var expectsReply: Bool { dbus_message_get_no_reply(raw) == 0 }

    // MARK: Arguments

    private func append(_ arguments: [BusValue]) throws {
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for argument in arguments {
            if let path = Self.objectPaths(in: argument).first(where: { !Self.isValidObjectPath($0) }) {
                throw BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "not a D-Bus object path: \(path)")
            }
            guard Self.append(argument, to: &iter) else {
                throw BusError(name: "org.freedesktop.DBus.Error.NoMemory", message: "cannot append an argument")
            }
        }
    }

    private static func append(_ value: BusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .string(let text):
            return mamfs_dbus_append_string(&iter, validUTF8(text)) != 0
        case .uint32(let number):
            return mamfs_dbus_append_uint32(&iter, number) != 0
        case .int32(let number):
            return mamfs_dbus_append_int32(&iter, number) != 0
        case .bool(let truth):
            return mamfs_dbus_append_boolean(&iter, truth ? 1 : 0) != 0
        case .objectPath(let path):
            return mamfs_dbus_append_object_path(&iter, path) != 0
        case .strings(let texts):
            var array = DBusMessageIter()
            guard dbus_message_iter_open_container(&iter, mamfs_dbus_type_array, "s", &array) != 0 else { return false }
            var ok = true
            for text in texts where ok { ok = mamfs_dbus_append_string(&array, validUTF8(text)) != 0 }
            return dbus_message_iter_close_container(&iter, &array) != 0 && ok
        case .stringDictionary(let entries):
            var array = DBusMessageIter()
            guard dbus_message_iter_open_container(&iter, mamfs_dbus_type_array, "{sv}", &array) != 0 else { return false }
            var ok = true
            for (key, text) in entries.sorted(by: { $0.key < $1.key }) where ok {
                var entry = DBusMessageIter()
                var variant = DBusMessageIter()
                ok = dbus_message_iter_open_container(&array, mamfs_dbus_type_dict_entry, nil, &entry) != 0
                    && mamfs_dbus_append_string(&entry, validUTF8(key)) != 0
                    && dbus_message_iter_open_container(&entry, mamfs_dbus_type_variant, "s", &variant) != 0
                    && mamfs_dbus_append_string(&variant, validUTF8(text)) != 0
                    && dbus_message_iter_close_container(&entry, &variant) != 0
                    && dbus_message_iter_close_container(&array, &entry) != 0
            }
            return dbus_message_iter_close_container(&iter, &array) != 0 && ok
        case .structures(let signature, let rows):
            var array = DBusMessageIter()
            guard dbus_message_iter_open_container(&iter, mamfs_dbus_type_array, signature, &array) != 0 else { return false }
            var ok = true
            for row in rows where ok {
                var structure = DBusMessageIter()
                ok = dbus_message_iter_open_container(&array, mamfs_dbus_type_struct, nil, &structure) != 0
                for field in row where ok { ok = append(field, to: &structure) }
                ok = dbus_message_iter_close_container(&array, &structure) != 0 && ok
            }
            return dbus_message_iter_close_container(&iter, &array) != 0 && ok
        case .other:
            return false
        }
    }

    /// The object paths in `value` (in structures too).
    private static func objectPaths(in value: BusValue) -> [String] {
        switch value {
        case .objectPath(let path): return [path]
        case .structures(_, let rows): return rows.flatMap { $0.flatMap(objectPaths) }
        default: return []
        }
    }

    /// libdbus aborts the process on a malformed object path, so it is checked first.
    static func isValidObjectPath(_ path: String) -> Bool {
        !path.utf8.contains(0) && dbus_validate_path(path, nil) != 0
    }

    /// D-Bus strings must be valid UTF-8 without NUL (libdbus aborts the process otherwise):
    /// invalid bytes become U+FFFD, NUL becomes U+FFFD too.
    private static func validUTF8(_ text: String) -> String {
        let repaired = String(decoding: Array(text.utf8), as: UTF8.self)
        return repaired.contains("\0") ? repaired.replacingOccurrences(of: "\0", with: "\u{FFFD}") : repaired
    }

    /// The message's arguments, in order.
    public var arguments: [BusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var values: [BusValue] = []
        repeat {
            values.append(Self.read(&iter))
        } while dbus_message_iter_next(&iter) != 0
        return values
    }

    private static func read(_ iter: inout DBusMessageIter) -> BusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        switch type {
        case mamfs_dbus_type_string:
            return .string(mamfs_dbus_get_string(&iter).map { String(cString: $0) } ?? "")
        case mamfs_dbus_type_uint32:
            return .uint32(mamfs_dbus_get_uint32(&iter))
        case mamfs_dbus_type_int32:
            return .int32(mamfs_dbus_get_int32(&iter))
        case mamfs_dbus_type_boolean:
            return .bool(mamfs_dbus_get_boolean(&iter) != 0)
        case mamfs_dbus_type_object_path:
            return .objectPath(mamfs_dbus_get_string(&iter).map { String(cString: $0) } ?? "")
        case mamfs_dbus_type_array where dbus_message_iter_get_element_type(&iter) == mamfs_dbus_type_string:
            var element = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &element)
            var texts: [String] = []
            while dbus_message_iter_get_arg_type(&element) == mamfs_dbus_type_string {
                texts.append(mamfs_dbus_get_string(&element).map { String(cString: $0) } ?? "")
                dbus_message_iter_next(&element)
            }
            return .strings(texts)
        case mamfs_dbus_type_array where dbus_message_iter_get_element_type(&iter) == mamfs_dbus_type_dict_entry:
            var element = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &element)
            var entries: [String: String] = [:]
            while dbus_message_iter_get_arg_type(&element) == mamfs_dbus_type_dict_entry {
                var entry = DBusMessageIter()
                dbus_message_iter_recurse(&element, &entry)
                if case .string(let key) = read(&entry), dbus_message_iter_next(&entry) != 0,
                   dbus_message_iter_get_arg_type(&entry) == mamfs_dbus_type_variant {
                    var variant = DBusMessageIter()
                    dbus_message_iter_recurse(&entry, &variant)
                    if case .string(let text) = read(&variant) { entries[key] = text }
                }
                dbus_message_iter_next(&element)
            }
            return .stringDictionary(entries)
        case mamfs_dbus_type_array where dbus_message_iter_get_element_type(&iter) == mamfs_dbus_type_struct:
            let signature = dbus_message_iter_get_signature(&iter)
            let elementSignature = signature.map { String(String(cString: $0).dropFirst()) } ?? ""
            dbus_free(signature)
            var element = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &element)
            var rows: [[BusValue]] = []
            while dbus_message_iter_get_arg_type(&element) == mamfs_dbus_type_struct {
                var field = DBusMessageIter()
                dbus_message_iter_recurse(&element, &field)
                var row: [BusValue] = []
                while dbus_message_iter_get_arg_type(&field) != 0 {
                    row.append(read(&field))
                    dbus_message_iter_next(&field)
                }
                rows.append(row)
                dbus_message_iter_next(&element)
            }
            return .structures(signature: elementSignature, rows)
        default:
            let signature = dbus_message_iter_get_signature(&iter)
            defer { dbus_free(signature) }
            return .other(signature.map { String(cString: $0) } ?? "")
        }
    }
}
