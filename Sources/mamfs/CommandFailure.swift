import Foundation
import MAMProtection

/// A failed operation: the CLI prints `mamfs: VERB: SUBJECT: MESSAGE` and exits with `exitCode`.
struct CommandFailure: Error {
    /// The file (or account) the failure is about, if any.
    let subject: String?
    let message: String
    let exitCode: ExitCode

    init(subject: String?, message: String, exitCode: ExitCode) {
        self.subject = subject
        self.message = message
        self.exitCode = exitCode
    }

    /// Wraps any error: `MAMError` keeps its message and sysexits code, Foundation file errors
    /// are mapped to exit codes, anything else is an internal error (`.software`).
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
                self.init(subject: subject, message: "permission denied", exitCode: ExitCode.noPerm)
            case .fileWriteOutOfSpace, .fileWriteVolumeReadOnly, .fileWriteFileExists:
                self.init(subject: subject, message: "cannot create output", exitCode: ExitCode.cantCreate)
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
