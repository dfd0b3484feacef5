import Foundation
import MAMProtection

/// One verb of the command line (`protect`, `policy show`, ...): its argument spec, help text
/// and the function that runs it.
struct Verb: Sendable {
    /// The verb as typed: "protect", or "policy show" for a sub-verb.
    let name: String
    /// The synopsis line(s), without the leading "usage: ".
    let usage: [String]
    /// One sentence saying what the verb does.
    let summary: String
    /// Option descriptions, one per line (`--state DIR`, `-v` and `--help` are added by `helpText`).
    let optionHelp: [String]
    let spec: ArgumentSpec
    /// Runs the verb; returns the exit code, throws `UsageError` or `CommandFailure`.
    let run: @Sendable (ParsedArguments, Invocation) throws -> ExitCode

    init(_ name: String, usage: [String], summary: String, options: [String] = [],
         spec: ArgumentSpec, run: @escaping @Sendable (ParsedArguments, Invocation) throws -> ExitCode) {
        self.name = name
        self.usage = usage
        self.summary = summary
        self.optionHelp = options
        self.spec = spec
        self.run = run
    }

    /// What `-v`/`--verbose` does, as `mamfs --help` and every verb's help print it.
    static let verboseHelp = [
        "  -v, --verbose           say more: mount prints the daemon's pid and the daemon logs when it mounts",
        "                          and unmounts; unmount says when the daemon has exited; wipe lists each",
        "                          file and directory it removes; other verbs print what they print without it",
    ]

    /// The text `mamfs VERB --help` prints.
    var helpText: String {
        var lines = usage.enumerated().map { ($0.offset == 0 ? "usage: " : "       ") + $0.element }
        lines.append("")
        lines.append(summary)
        lines.append("")
        lines.append("options:")
        for option in optionHelp { lines.append("  " + option) }
        lines.append("  --state DIR             state directory (default: $MAMFS_STATE, $XDG_DATA_HOME/mamfs,")
        lines.append("                          ~/.local/share/mamfs)")
        lines += Self.verboseHelp
        lines.append("  --help                  show this help")
        return lines.joined(separator: "\n") + "\n"
    }
}
