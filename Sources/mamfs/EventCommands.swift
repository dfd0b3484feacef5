import Foundation
import Glibc
import MAMBus
import MAMProtection
import Synchronization

/// `mamfs events`: prints the `org.mamfs.Mamfs1` signals of the session bus as they come.
enum EventCommands {
    static let events = Verb(
        "events",
        usage: ["mamfs events [--json] [--count N]"],
        summary: "Listen on the session bus and print one line per mamfs signal (Enrolled, Unenrolled, Wiped, PolicyChanged, AccessBlocked, KeysDropped, ComplianceResult: docs/NOTIFICATIONS.md) until SIGINT or SIGTERM. Once subscribed it says so on stderr. Without a session bus (DBUS_SESSION_BUS_ADDRESS unset and no $XDG_RUNTIME_DIR/bus), or when it cannot be reached or goes away, it exits \(ExitCode.unavailable).",
        options: ["--json                  one JSON object per line: {signal, sender, accountId, upn, status,",
                  "                        statusCode, error, ...the signal's own arguments}",
                  "--count N               stop after N signals"],
        spec: ArgumentSpec(flags: ["--json"], options: ["--count"]),
        run: runEvents)

    /// Set by SIGINT and SIGTERM.
    static let stopRequested = Atomic<Bool>(false)

    static func runEvents(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        var limit: Int?
        if let text = arguments.value("--count") {
            guard let count = Int(text), count > 0 else { throw UsageError("--count needs a positive number, not '\(InputQuote.short(text))'") }
            limit = count
        }
        let json = arguments.flag("--json")
        guard let address = SessionBusAddress.resolve(invocation.environment) else {
            throw CommandFailure(subject: nil, message: SessionBusAddress.missingReason, exitCode: .unavailable)
        }
        let bus: BusConnection
        do {
            bus = try BusConnection(address: address)
            try bus.addMatch(MamfsInterface.matchRule)
        } catch {
            throw CommandFailure(subject: nil, message: "the session bus \(address) cannot be reached: \(error)", exitCode: .unavailable)
        }
        defer { bus.close() }
        for number in [SIGINT, SIGTERM] {
            signal(number) { _ in EventCommands.stopRequested.store(true, ordering: .relaxed) }
        }
        Output.error("mamfs: events: listening for \(MamfsInterface.interface) signals on \(address)")
        var printed = 0
        while !stopRequested.load(ordering: .relaxed) {
            let message: BusMessage?
            do {
                message = try bus.nextMessage(timeout: 0.2)
            } catch {
                throw CommandFailure(subject: nil, message: "the session bus went away", exitCode: .unavailable)
            }
            guard let message, let received = ReceivedSignal(message) else { continue }
            // Any program on the bus may send such a signal: its text is escaped for the terminal.
            Output.out(json ? try JSON.line(object(received)) : Output.printable(line(received)) + "\n")
            printed += 1
            if let limit, printed >= limit { break }
        }
        return ExitCode.ok
    }

    /// The JSON object of a signal: its fields, `signal` and `sender`.
    static func object(_ received: ReceivedSignal) -> [String: Any] {
        var object: [String: Any] = ["signal": received.signal.rawValue, "sender": received.sender]
        for (name, value) in received.fields {
            switch value {
            case .text(let text): object[name] = text
            case .number(let number): object[name] = Int(number)
            }
        }
        return object
    }

    /// The human line: `SIGNAL accountId=... upn=... status=NAME(CODE) [error="..."] [more=...]`.
    static func line(_ received: ReceivedSignal) -> String {
        var words = [received.signal.rawValue]
        for (name, value) in received.fields where name != "statusCode" {
            switch (name, value) {
            case ("status", .text(let text)):
                var code: UInt32 = 0
                if case .number(let number)? = received["statusCode"] { code = number }
                words.append("status=\(text)(\(code))")
            case ("error", .text(let text)) where text.isEmpty:
                continue
            case (_, .text(let text)):
                words.append("\(name)=\(quoted(text))")
            case (_, .number(let number)):
                words.append("\(name)=\(number)")
            }
        }
        return words.joined(separator: " ")
    }

    private static func quoted(_ text: String) -> String {
        guard text.isEmpty || text.contains(where: { $0 == " " || $0 == "\"" || $0.isNewline }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}
