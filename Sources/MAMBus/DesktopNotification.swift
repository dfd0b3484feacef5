import MAMProtection

/// The `org.freedesktop.Notifications.Notify` call that tells the desktop user a mount
/// blocked a program (Desktop Notifications Specification 1.2: `Notify(app_name s,
/// replaces_id u, app_icon s, summary s, body s, actions as, hints a{sv}, expire_timeout i)`).
enum DesktopNotification {
    static let destination = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    static let interface = "org.freedesktop.Notifications"

    /// The summary names the program and the file (their last path components); the body has
    /// both paths and the rule.
    static func call(for blocked: ProtectionEvent.AccessBlocked) throws -> BusMessage {
        let app = lastComponent(blocked.executable)
        let file = lastComponent(blocked.path)
        let summary = "\(app.isEmpty ? "A program" : app) was blocked from \(verb(blocked.action)) \(file)"
        let body = "\(blocked.path)\nby \(blocked.executable.isEmpty ? "an unknown program" : blocked.executable) (policy rule \(blocked.rule))"
        return try BusMessage.methodCall(destination: destination, path: path, interface: interface, member: "Notify", arguments: [
            .string("mamfs"), .uint32(0), .string("dialog-warning"), .string(summary), .string(body),
            .strings([]), .stringDictionary(["category": "device"]), .int32(-1),
        ])
    }

    private static func verb(_ action: String) -> String {
        switch action {
        case "create": return "creating"
        case "save": return "saving"
        case "declassify": return "making personal"
        case "open-write": return "writing"
        default: return "opening"
        }
    }

    private static func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
