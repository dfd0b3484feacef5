import Foundation

/// A one-line progress counter on stderr, shown only when stderr is a terminal and redrawn at
/// most ten times a second.
final class ProgressLine {
    private let enabled: Bool
    private let prefix: String
    private var lastDraw: TimeInterval = 0
    private var drawn = false

    init(prefix: String) {
        self.prefix = prefix
        self.enabled = isatty(STDERR_FILENO) == 1
    }

    /// Redraws the line with `text` after the prefix (throttled).
    func update(_ text: String) {
        guard enabled else { return }
        let now = Date().timeIntervalSince1970
        if drawn && now - lastDraw < 0.1 { return }
        lastDraw = now
        drawn = true
        Output.errorRaw("\r\u{1B}[K" + prefix + text)
    }

    /// Clears the line (if anything was drawn).
    func finish() {
        guard enabled, drawn else { return }
        Output.errorRaw("\r\u{1B}[K")
        drawn = false
    }
}
