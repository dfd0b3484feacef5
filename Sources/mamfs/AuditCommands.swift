import Foundation
import MAMProtection

/// `audit` and `audit verify`: reading the audit log of the state directory and checking its
/// hash chain.
enum AuditCommands {
    static let show = Verb(
        "audit",
        usage: ["mamfs audit [--json] [--since TIME] [--account ACCOUNT] [--state DIR]",
                "mamfs audit verify [--state DIR]"],
        summary: "Show the audit log: the denials of the caller-aware rules (and, at protectionLevel audit, the would-be denials) of mounts and the CLI, and the administrative actions of the CLI (protect, declassify, decrypt, unprotect-data of a managed account's data, wipe, enroll, unenroll, policy set, refused provider imports). 'mamfs audit verify' checks that no record was edited, removed, reordered or cut off.",
        options: ["--json                  print a JSON array of records {seq, time, uid, pid, executable,",
                  "                        action, path, owner, decision, rule, count, hash}",
                  "--since TIME            only records from TIME on: ISO 8601 (2026-12-01T14:55:37Z,",
                  "                        2026-12-01T15:55:37.250+01:00, 2026-12-01 = midnight UTC) or a",
                  "                        time before now: 90s, 10m, 2h, 1d",
                  "--account ACCOUNT       only records of objects ACCOUNT owns (accountId or UPN; '' for",
                  "                        unmanaged and untagged objects)"],
        spec: ArgumentSpec(flags: ["--json"], options: ["--since", "--account"]),
        run: runShow)

    static let verify = Verb(
        "audit verify",
        usage: ["mamfs audit verify [--state DIR]"],
        summary: "Recompute the audit log's hash chain and compare its last record with the state database. Exit \(ExitCode.ok) with 'audit log verified: N records', or \(ExitCode.dataErr) naming the first bad record and why (edited, missing, out of order, cut off, removed from the end).",
        spec: ArgumentSpec(),
        run: runVerify)

    static func runShow(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let since = try arguments.value("--since").map { text in
            guard let date = parseSince(text, now: Date()) else {
                throw UsageError("--since: '\(InputQuote.short(text))' is neither an ISO 8601 time nor a relative one like 10m, 2h or 1d")
            }
            return date
        }
        let context = try invocation.openContext()
        let account = try arguments.value("--account").map { try accountId(of: $0, in: context) }
        let log = context.auditLog
        let records = try attempt(log.url.path) { try log.records(since: since, account: account) }
        if arguments.flag("--json") {
            let objects: [[String: Any]] = records.map { record in
                ["seq": record.seq, "time": record.time, "uid": record.uid, "pid": record.pid,
                 "executable": record.executable, "action": record.action, "path": record.path,
                 "owner": record.owner, "decision": record.decision, "rule": record.rule,
                 "count": record.count, "hash": record.hash]
            }
            Output.out(try JSON.text(objects))
            return ExitCode.ok
        }
        if records.isEmpty {
            Output.line("No audit records.")
            return ExitCode.ok
        }
        var rows = [["SEQ", "TIME", "DECISION", "ACTION", "RULE", "COUNT", "PID", "EXECUTABLE", "OWNER", "PATH"]]
        for record in records {
            rows.append([String(record.seq), record.time, record.decision, record.action,
                         record.rule.isEmpty ? "-" : record.rule, String(record.count), String(record.pid),
                         record.executable, record.owner.isEmpty ? "-" : record.owner, record.path])
        }
        Output.out(Output.table(rows))
        return ExitCode.ok
    }

    static func runVerify(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        let log = context.auditLog
        switch try attempt(log.url.path, { try log.verify() }) {
        case .verified(let count):
            Output.line("audit log verified: \(count) record\(count == 1 ? "" : "s")")
            return ExitCode.ok
        case .broken(let seq, let reason):
            throw CommandFailure(subject: log.url.path, message: "first bad record: seq \(seq): \(reason)", exitCode: .dataErr)
        }
    }

    /// The owner an `--account` value filters on: a registered accountId or UPN (any case, also
    /// a wiped one) -> its accountId, any other accountId itself, '' unmanaged.
    private static func accountId(of name: String, in context: ProtectionContext) throws -> String {
        let canonical = AccountIdentity.canonical(name)
        if canonical.isEmpty { return "" }
        if let record = try attempt(name, { try context.state.account(named: canonical) }) { return record.accountId }
        if AccountIdentity.isAccountId(canonical) { return canonical }
        throw CommandFailure(subject: name, message: "unknown account: not registered (see 'mamfs accounts')", exitCode: .noPerm)
    }

    /// `--since`: "N" followed by s, m, h or d (that long before `now`), or an ISO 8601 time
    /// with a zone (Z or ±HH:MM, fractional seconds allowed), or a date (midnight UTC).
    static func parseSince(_ text: String, now: Date) -> Date? {
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        if let unit = text.last.flatMap({ units[$0] }), let amount = UInt32(text.dropLast()), text.count > 1 {
            return now - TimeInterval(amount) * unit
        }
        let formats: [ISO8601DateFormatter.Options] = [
            [.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime], [.withFullDate],
        ]
        for options in formats {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            formatter.timeZone = TimeZone(identifier: "UTC")
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
