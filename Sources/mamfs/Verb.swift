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
    /// Option descriptions, one per line (`--state DIR` and `--help` are added by `helpText`).
    let optionHelp: [String]
    let spec: ArgumentSpec
    /// Runs the verb; returns the exit code, throws `UsageError` or `CommandFailure`.
    let run: @Sendable (ParsedArguments, Invocation) throws -> Int32

    init(_ name: String, usage: [String], summary: String, options: [String] = [],
         spec: ArgumentSpec, run: @escaping @Sendable (ParsedArguments, Invocation) throws -> Int32) {
        self.name = name
        self.usage = usage
        self.summary = summary
        self.optionHelp = options
        self.spec = spec
        self.run = run
    }

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
        lines.append("  --help                  show this help")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// A failed operation: the CLI prints `mamfs: VERB: SUBJECT: MESSAGE` and exits with `exitCode`.
struct CommandFailure: Error {
    /// The file (or account) the failure is about, if any.
    let subject: String?
    let message: String
    let exitCode: Int32

    init(subject: String?, message: String, exitCode: Int32) {
        self.subject = subject
        self.message = message
        self.exitCode = exitCode
    }

    /// Wraps any error: `MAMError` keeps its message and sysexits code, Foundation file errors
    /// are mapped to sysexits, anything else is an internal error (70).
    init(subject: String?, error: Error) {
        if let failure = error as? CommandFailure {
            self = failure
            return
        }
        if let mam = error as? MAMError {
            self.init(subject: subject, message: mam.description, exitCode: mam.exitCode)
            return
        }
        let nsError = error as NSError
        if nsError.domain == NSCocoaErrorDomain {
            switch CocoaError.Code(rawValue: nsError.code) {
            case .fileReadNoSuchFile, .fileNoSuchFile:
                self.init(subject: subject, message: "no such file", exitCode: ExitCode.noInput)
            case .fileReadNoPermission, .fileWriteNoPermission:
                self.init(subject: subject, message: "permission denied", exitCode: ExitCode.noPermission)
            case .fileWriteOutOfSpace, .fileWriteVolumeReadOnly, .fileWriteFileExists:
                self.init(subject: subject, message: "cannot create output", exitCode: ExitCode.cannotCreate)
            default:
                self.init(subject: subject, message: nsError.localizedDescription, exitCode: ExitCode.software)
            }
            return
        }
        self.init(subject: subject, message: String(describing: error), exitCode: ExitCode.software)
    }

    /// The stderr line, without the trailing newline: `mamfs: VERB: SUBJECT: reason`. Library
    /// messages often name the path already ("file not found: /p", "...: /p: bad tag"); the path
    /// is then moved to the front rather than printed twice, and when it is part of a sentence
    /// ("no mamfs state in /p") the message is printed as it is.
    func line(verb: String) -> String {
        // Messages quote input shortly already; the caps are the net for any that does not
        // (the subject may be an account name or path typed by the user).
        let text = InputQuote.short(message.split(whereSeparator: \.isNewline).joined(separator: " "), limit: 700)
        guard let subject = subject.map({ InputQuote.short($0, limit: 256) }), !subject.isEmpty else {
            return "mamfs: \(verb): \(text)"
        }
        if !text.contains(subject) {
            return "mamfs: \(verb): \(subject): \(text)"
        }
        if text.hasSuffix(": " + subject) {
            return "mamfs: \(verb): \(subject): \(text.dropLast(subject.count + 2))"
        }
        if let range = text.range(of: ": " + subject + ": ") {
            return "mamfs: \(verb): \(subject): \(text.replacingCharacters(in: range, with: ": "))"
        }
        return "mamfs: \(verb): \(text)"
    }
}

/// sysexits(3) codes the CLI uses.
enum ExitCode {
    static let ok: Int32 = 0
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let noInput: Int32 = 66
    static let software: Int32 = 70
    static let cannotCreate: Int32 = 73
    static let noPermission: Int32 = 77
}

/// Runs `body`, turning any error it throws into a `CommandFailure` about `subject`.
@discardableResult
func attempt<T>(_ subject: String?, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as UsageError {
        throw error
    } catch {
        throw CommandFailure(subject: subject, error: error)
    }
}

/// What every verb gets besides its arguments: its name, the environment and the state directory.
struct Invocation {
    /// The verb name as printed in messages ("protect", "policy set").
    let verb: String
    let environment: [String: String]
    /// The `--state DIR` value, if given.
    let explicitState: String?

    /// The environment variable naming a passphrase file for a passphrase-derived master key.
    static let passphraseVariable = "MAMFS_PASSPHRASE_FILE"

    /// The state directory in effect (see `StateDirectory.resolve`).
    var stateDirectory: StateDirectory {
        StateDirectory.resolve(explicit: explicitState, environment: environment)
    }

    /// `$MAMFS_PASSPHRASE_FILE`, if set and not empty.
    var passphraseFile: String? {
        guard let value = environment[Self.passphraseVariable], !value.isEmpty else { return nil }
        // Absolute, so a mount daemon (which changes directory to /) still finds it.
        return value.hasPrefix("/") ? value : PathName.appending(value, to: FileManager.default.currentDirectoryPath)
    }

    /// Opens the protection context of the state directory.
    func openContext() throws -> ProtectionContext {
        let directory = stateDirectory
        return try attempt(directory.url.path) {
            try ProtectionContext.open(stateDirectory: directory, passphraseFile: passphraseFile)
        }
    }

    /// Reports one failure on stderr without stopping (for verbs that take several paths).
    func report(_ failure: CommandFailure) {
        Output.error(failure.line(verb: verb))
    }
}
