import Foundation

/// A one-line progress counter on stderr, shown only when stderr is a terminal, redrawn in
/// place at most once per `interval` seconds and cut to the terminal's width.
final class ProgressLine {
    private let enabled: Bool
    private let prefix: String
    private let interval: TimeInterval
    private var lastDraw: TimeInterval = 0
    private var drawn = false

    /// - Parameters:
    ///   - prefix: written before every text.
    ///   - interval: least seconds between two redraws (`update`).
    init(prefix: String, interval: TimeInterval = 0.1) {
        self.prefix = prefix
        self.interval = interval
        self.enabled = isatty(STDERR_FILENO) == 1
    }

    /// True when stderr is a terminal (nothing is written otherwise).
    var isEnabled: Bool { enabled }

    /// Redraws the line with `text` after the prefix (throttled).
    func update(_ text: String) {
        guard enabled else { return }
        let now = Date().timeIntervalSince1970
        if drawn && now - lastDraw < interval { return }
        lastDraw = now
        draw(text)
    }

    /// Clears the line (if anything was drawn).
    func finish() {
        guard enabled, drawn else { return }
        Output.errorRaw("\r\u{1B}[K")
        drawn = false
    }

    /// Draws `text` a last time (unthrottled) and ends the line, so it stays on the terminal.
    func finish(showing text: String) {
        guard enabled else { return }
        draw(text)
        Output.errorRaw("\n")
        drawn = false
    }

    private func draw(_ text: String) {
        drawn = true
        // A file name cannot move the cursor or end the line (`Output.printable`).
        var line = Output.printable(prefix + text)
        // A line longer than the terminal wraps, and "\r" would then redraw only its last row.
        let width = Self.terminalWidth()
        if line.count >= width { line = String(line.prefix(max(1, width - 1))) }
        Output.errorRaw("\r\u{1B}[K" + line)
    }

    /// Columns of the terminal on stderr (80 when it does not say).
    private static func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }
}
