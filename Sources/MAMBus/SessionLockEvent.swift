/// A change of the desktop session's lock, as `SessionLockMonitor` reports it.
///
/// `source` names where it came from: "logind" (the session's `org.freedesktop.login1.Session`
/// `Lock`/`Unlock`), or the screensaver interface whose `ActiveChanged` said it
/// ("org.freedesktop.ScreenSaver", "org.gnome.ScreenSaver").
public enum SessionLockEvent: Sendable, Equatable {
    /// The session was locked (logind `Lock`, or `ActiveChanged(true)`).
    case locked(source: String)
    /// The session was unlocked (logind `Unlock`, or `ActiveChanged(false)`).
    case unlocked(source: String)
}
