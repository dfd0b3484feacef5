import Foundation

/// The `screenLockEnabled` check: the GNOME setting `org.gnome.desktop.screensaver
/// lock-enabled`, as `gsettings get` reports it for the user mamfs runs as (read from that
/// user's dconf database, without D-Bus; the schema's default, true, when the user never set
/// it). It does not look at the idle delay or at other desktops' lockers. Without gsettings,
/// or when it cannot answer (no such schema), the result is NotCompliant "cannot determine".
enum ScreenLockCheck {
    /// Where gsettings is looked for, in order (never through PATH).
    static let gsettingsPaths = ["/usr/bin/gsettings", "/bin/gsettings"]
    static let timeoutSeconds: Double = 10

    static func evaluate(gsettingsPaths: [String] = gsettingsPaths) -> ComplianceOutcome {
        let name = "screenLockEnabled"
        guard let program = gsettingsPaths.first(where: { access($0, X_OK) == 0 }) else {
            return ComplianceOutcome(check: name, status: .notCompliant,
                                     reason: "cannot determine whether the screen locks: gsettings is not installed")
        }
        let (ending, line) = ComplianceProgram.run([program, "get", "org.gnome.desktop.screensaver", "lock-enabled"],
                                                   timeout: timeoutSeconds)
        switch (ending, line) {
        case (.exited(0), "true"):
            return ComplianceOutcome(check: name, status: .compliant, reason: "org.gnome.desktop.screensaver lock-enabled is true")
        case (.exited(0), "false"):
            return ComplianceOutcome(check: name, status: .notCompliant, reason: "the screen lock is off (org.gnome.desktop.screensaver lock-enabled is false)")
        default:
            return ComplianceOutcome(check: name, status: .notCompliant,
                                     reason: "cannot determine whether the screen locks: \(program) get org.gnome.desktop.screensaver lock-enabled did not answer true or false")
        }
    }
}
