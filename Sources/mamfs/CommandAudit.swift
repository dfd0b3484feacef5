import Foundation
import MAMProtection

/// What the CLI writes to the audit log: its administrative actions (protect, declassify,
/// decrypt, wipe, enroll, unenroll, policy set) as "allowed" records, and the declassifications
/// the caller-aware rules deny ("denied", exit 77) or only record ("audited", level audit), and
/// the declassifications recorded before they were made that then failed ("failed").
/// The CLI is the caller: uid, pid and executable are this process's.
enum CommandAudit {
    /// This process as the caller the rules and the log see.
    static let executable = ExecutableFile.current()

    /// Records one event of this process and writes it at once (the CLI exits soon after).
    /// - Parameters:
    ///   - path: the object (an absolute path, see `absolute`, or an account for account actions).
    ///   - owner: the object's owner; nil (untagged) is recorded as "".
    static func record(_ context: ProtectionContext, action: String, path: String, owner: String?,
                       verdict: Verdict = .allowed, rule: String = "") {
        let log = context.auditLog
        log.record(.ofThisProcess(executable: executable.path, action: action, path: path,
                                  owner: owner ?? "", decision: verdict.auditName, rule: rule))
        log.flush()
    }

    /// Records a declassification of managed data as allowed before it is made, so that it is
    /// never made unrecorded: a record means the change was allowed and begun.
    /// - Parameters: as `record`; `subject` names the object in the error line (as typed).
    /// - Throws: `CommandFailure` (exit 74) naming the log and the reason when the record cannot
    ///   be written; nothing has been changed then.
    static func recordDeclassification(_ context: ProtectionContext, action: String, path: String, owner: String?,
                                       subject: String) throws {
        try writeOrRefuse(context, subject: subject) {
            try context.auditLog.recordNow([.ofThisProcess(executable: executable.path, action: action, path: path,
                                                           owner: owner ?? "", decision: Verdict.allowed.auditName, rule: "")])
        }
    }

    /// `recordDeclassification` of every object of `objects` (path -> its managed owner) under
    /// "declassify"; the objects of one owner become one record (the first path, their count).
    static func recordDeclassifications(_ context: ProtectionContext, objects: [(path: String, owner: String?)],
                                        subject: String) throws {
        try writeOrRefuse(context, subject: subject) {
            try context.auditLog.recordNow(objects.map { object in
                .ofThisProcess(executable: executable.path, action: "declassify", path: absolute(object.path),
                               owner: object.owner ?? "", decision: Verdict.allowed.auditName, rule: "")
            })
        }
    }

    /// Records that the change of `objects` (path as the log records it -> owner) recorded
    /// before it was made (`recordDeclassification(s)`, or the audited records of
    /// `requireDeclassifyAllowed`) did not complete: the same action, path and owner, decision
    /// "failed", rule "exit=N" (`failure`'s exit code). The earlier record says the change was
    /// allowed and begun; this one says the command failed (for a tree: the objects before
    /// the failure were changed, as its error line says). Written at once; a log that cannot
    /// take it is reported on stderr, and the command fails with `failure` anyway.
    static func recordFailure(_ context: ProtectionContext, action: String, objects: [(path: String, owner: String?)],
                              failure: CommandFailure) {
        let events = objects.map { object in
            AuditEvent.ofThisProcess(executable: executable.path, action: action, path: object.path, owner: object.owner ?? "",
                                     decision: failedDecision, rule: "exit=\(failure.exitCode.rawValue)")
        }
        do {
            try context.auditLog.recordNow(events)
        } catch {
            // `record` reports a log it cannot write on stderr.
            events.forEach(context.auditLog.record)
            context.auditLog.flush()
        }
    }

    /// The decision word of `recordFailure`'s records.
    static let failedDecision = "failed"

    /// Runs `write` (a write of the audit log); a failure becomes the refusal of the change.
    private static func writeOrRefuse(_ context: ProtectionContext, subject: String, _ write: () throws -> Void) throws {
        do {
            try write()
        } catch {
            throw CommandFailure(subject: subject,
                                 message: "the audit log \(context.auditLog.url.path) cannot be written (\(error)): a declassification of managed data is not made unrecorded; nothing was changed",
                                 exitCode: .ioErr)
        }
    }

    /// Refuses (exit 77) an account the state's allowed-accounts list does not let in, after
    /// recording a "denied" event with rule "allowedAccounts" for `action`.
    /// - Parameter names: how the command named the account (accountId or `OID.TID`, UPN).
    static func requireAllowed(_ context: ProtectionContext, action: String, names: [String?]) throws {
        let shown = names.compactMap { $0 }.first { !$0.isEmpty } ?? ""
        guard try !attempt(shown, { try context.enrollment.isAllowed(names) }) else { return }
        record(context, action: action, path: AccountIdentity.canonical(shown), owner: AccountIdentity.canonical(shown),
               verdict: .denied, rule: "allowedAccounts")
        throw CommandFailure(subject: shown, message: "denied: not in the allowed accounts (see 'mamfs accounts allowed')",
                             exitCode: .noPerm)
    }

    /// The caller-aware decision on making the objects `owners` (path -> current owner) belong
    /// to `newOwner`: every object a managed account owns is a declassification its policy
    /// must allow (`allowUserDecrypt`). Denied and audited objects are recorded under `action`.
    /// - Returns: the objects only audited, as recorded (path as the log records it, owner);
    ///   the caller records nothing more for them. Empty when none was.
    /// - Throws: `CommandFailure` (exit 77) naming the rule and the first denied path when the
    ///   level is block; (exit 74) when the audited records cannot be written; nothing has been
    ///   changed then.
    /// `display` maps a recorded path to the one the error line names (the path as typed);
    /// `recorded` maps it to the one the log records (default: `absolute`).
    static func requireDeclassifyAllowed(_ context: ProtectionContext, action: String, owners: [(path: String, owner: String?)],
                                         newOwner: String, recorded: (String) -> String = absolute,
                                         display: (String) -> String = { $0 }) throws -> [(path: String, owner: String?)] {
        let rules = context.accessRules
        var denied: [(String, AccessDecision)] = []
        var audited: [(path: String, owner: String?)] = []
        var auditedEvents: [AuditEvent] = []
        for (path, owner) in owners {
            let decision = rules.decide(AccessRequest(action: .declassify(newOwner: newOwner), executable: executable,
                                                      owner: owner, appAccount: newOwner))
            guard decision.isRecorded else { continue }
            let event = AuditEvent.ofThisProcess(executable: executable.path, action: action, path: recorded(path),
                                                 owner: owner ?? "", decision: decision.verdict.auditName, rule: decision.rule)
            if decision.verdict == .denied {
                denied.append((path, decision))
                context.auditLog.record(event)
            } else {
                audited.append((recorded(path), owner))
                auditedEvents.append(event)
            }
        }
        context.auditLog.flush()
        guard let (path, decision) = denied.first else {
            // An audited declassification goes ahead only once its records are written.
            if let first = owners.first {
                try writeOrRefuse(context, subject: display(first.path)) {
                    try context.auditLog.recordNow(auditedEvents)
                }
            }
            return audited
        }
        let others = denied.count > 1 ? " (and \(denied.count - 1) more below it)" : ""
        throw CommandFailure(subject: display(path),
                             message: "denied by policy (\(decision.rule)): the owner's data may not be made personal\(others); nothing was changed",
                             exitCode: .noPerm)
    }

    /// True when some managed account's policy can deny or audit a declassification (so the
    /// objects a command would declassify are worth listing first).
    static func declassifyIsChecked(_ context: ProtectionContext) -> Bool {
        let managed = (try? context.state.managedAccounts()) ?? []
        return managed.contains { record in
            guard let policy = context.policyEvaluator.policy(forAccountId: record.accountId) else { return false }
            return !policy.allowUserDecrypt && policy.protectionLevel != .off
        }
    }

    /// `path` made absolute (relative to the working directory) and standardized, as the log records paths.
    static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }
}
