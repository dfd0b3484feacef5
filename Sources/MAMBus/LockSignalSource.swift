/// One family of lock signals `SessionLockMonitor` listens to: the interface, the well-known
/// name whose owner alone may send them, the object path they must come from (logind's
/// session; any for a screensaver), and how a signal reads as a `SessionLockEvent`.
struct LockSignalSource: Sendable {
    /// What one message is to this source.
    enum Reading: Sendable, Equatable {
        /// Not one of its signals.
        case notOurs
        /// One of its signals with the wrong arguments (the reason).
        case malformed(String)
        /// A lock or an unlock, still to be checked against the sender.
        case event(SessionLockEvent)
    }

    private enum Signals: Sendable {
        /// `Lock()` and `Unlock()` of `org.freedesktop.login1.Session`.
        case logindSession
        /// `ActiveChanged(b)` of a screensaver interface.
        case activeChanged
    }

    let interface: String
    /// The well-known name that must own the sender at the time the signal is read.
    let ownerName: String
    /// The only object path it counts from; nil for any.
    let path: String?
    /// `SessionLockEvent`'s source.
    let label: String
    /// The line `SessionLockMonitor.sources` shows, without the bus.
    let summary: String
    private let signals: Signals

    /// The screensaver interfaces whose `ActiveChanged(b)` is heard: the freedesktop one (KDE,
    /// Xfce, the ScreenSaver specification) and GNOME's. Each is owned by the name it is called.
    static let screenSaverInterfaces = ["org.freedesktop.ScreenSaver", "org.gnome.ScreenSaver"]

    /// `Lock`/`Unlock` of the logind session at `sessionPath`, sent by org.freedesktop.login1.
    static func logind(sessionPath: String) -> LockSignalSource {
        LockSignalSource(interface: "org.freedesktop.login1.Session", ownerName: "org.freedesktop.login1",
                         path: sessionPath, label: "logind", summary: "logind session \(sessionPath)", signals: .logindSession)
    }

    /// `ActiveChanged(b)` of `interface`, sent by the owner of the same name from any path
    /// (KDE sends it from /ScreenSaver and /org/freedesktop/ScreenSaver, GNOME from
    /// /org/gnome/ScreenSaver).
    static func screenSaver(interface: String) -> LockSignalSource {
        LockSignalSource(interface: interface, ownerName: interface, path: nil, label: interface,
                         summary: interface, signals: .activeChanged)
    }

    /// The match rule that subscribes to its signals. It names no sender on purpose: the bus
    /// would then drop forged signals itself, but the sender check in `SessionLockMonitor`
    /// must hold on its own (and be testable), and it tells a forged signal apart in the log.
    var matchRule: String {
        var rule = "type='signal',interface='\(interface)'"
        if signals == .activeChanged { rule += ",member='ActiveChanged'" }
        if let path { rule += ",path='\(path)'" }
        return rule
    }

    func read(_ message: BusMessage) -> Reading {
        guard message.kind == .signal, message.interface == interface, let member = message.member else { return .notOurs }
        if let path, message.path != path { return .notOurs }
        switch signals {
        case .logindSession:
            guard member == "Lock" || member == "Unlock" else { return .notOurs }
            guard message.signature.isEmpty else { return .malformed("arguments (\(message.signature)) where logind sends none") }
            return .event(member == "Lock" ? .locked(source: label) : .unlocked(source: label))
        case .activeChanged:
            guard member == "ActiveChanged" else { return .notOurs }
            guard message.signature == "b", let active = message.arguments.first?.bool else {
                return .malformed("signature '\(message.signature)' instead of 'b'")
            }
            return .event(active ? .locked(source: label) : .unlocked(source: label))
        }
    }
}
