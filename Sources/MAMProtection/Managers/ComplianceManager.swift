import Foundation

/// What `check` or `remediate` found and did.
public struct ComplianceReport: Sendable {
    /// The account the checks ran for.
    public let account: AccountIdentity
    /// The result recorded as the account's last one.
    public let result: ComplianceResult
    /// Each check's outcome, in policy order (after remediation: of the check that followed).
    public let outcomes: [ComplianceOutcome]
    /// What remediation did, one line per failing check (empty for `check`).
    public let remediations: [ComplianceOutcome]
    /// The selective wipe a NotCompliant result started (`wipeOnNonCompliance`), or nil.
    public let wipe: WipeReport?
}

/// App Protection Conditional Access for an account: run its policy's `compliance` checks,
/// remediate, record the last result (state table `compliance_results`, the audit log) and
/// report it to `ProtectionContext.complianceEvents`. The gate that uses the result is
/// `ProtectionContext.requireKeyAccess`. Mirrors `IntuneMAMComplianceManager`
/// (remediateComplianceForAccountId:, the compliance status delegate).
public struct ComplianceManager: Sendable {
    let context: ProtectionContext

    /// Runs every check of the account's policy and records the result.
    /// - Parameter paths: the directories `encryptedBackingDevice` checks; empty: the backing
    ///   directories and protected paths the state knows for the account.
    /// - Returns: the report; with `wipeOnNonCompliance` a NotCompliant result has wiped the account.
    /// - Throws: `.unknownAccount`; `.applicationNotManaged` when the account is not enrolled;
    ///   `.invalidArguments` when its policy has no `compliance`; state errors.
    public func check(_ name: String, paths: [String] = []) throws -> ComplianceReport {
        let (identity, checks, policy) = try prepare(name)
        let evaluator = try self.evaluator(identity, paths: paths)
        let outcomes = evaluator.evaluate(checks)
        return try record(identity, policy: policy, result: ComplianceResult(outcomes: outcomes, at: Date()),
                          outcomes: outcomes, remediations: [], action: "compliance check")
    }

    /// Runs the remediation of every failing check, then checks again and records the result.
    ///
    /// A failing check with a `remediate` program has it run (its exit status mapped as a
    /// command check's; a status other than Compliant/NotCompliant, e.g. UserCancelled, is the
    /// result when the checks still fail). A failing check that needs the user
    /// (`remediateNeedsUser`, or no `remediate` program at all) makes the result
    /// InteractionRequired with `silent` when it still fails afterwards; without `silent` its
    /// program runs.
    /// - Throws: as `check`.
    public func remediate(_ name: String, silent: Bool, paths: [String] = []) throws -> ComplianceReport {
        let (identity, checks, policy) = try prepare(name)
        let evaluator = try self.evaluator(identity, paths: paths)
        let before = evaluator.evaluate(checks)
        var remediations: [ComplianceOutcome] = []
        var held: [ComplianceOutcome] = []
        for (check, outcome) in zip(checks, before) where outcome.status != .compliant {
            let needsUser = check.remediateNeedsUser || check.remediate == nil
            if needsUser && silent || check.remediate == nil {
                let line = ComplianceOutcome(check: check.displayName, status: .interactionRequired,
                                             reason: check.remediate == nil ? "needs the user (no remediation program): \(outcome.reason)"
                                                                            : "needs the user (not run with --silent): \(outcome.reason)")
                remediations.append(line)
                held.append(line)
                continue
            }
            guard let program = check.remediate else { continue }
            let timeout: Double
            if case .command(_, let seconds) = check.kind { timeout = seconds } else { timeout = ComplianceCheck.defaultTimeoutSeconds }
            let ran = ComplianceEvaluator.runProgram(program, timeout: timeout, check: check.displayName)
            remediations.append(ran)
            if ran.status != .compliant && ran.status != .notCompliant { held.append(ran) }
        }
        let after = evaluator.evaluate(checks)
        var result = ComplianceResult(outcomes: after, at: Date())
        if result.status != .compliant {
            // The check still failing whose remediation stopped short tells why (the user
            // cancelled, needs the user, no network), else the check's own outcome.
            let failing = Set(zip(checks, after).filter { $0.1.status != .compliant }.map { $0.0.displayName })
            if let reason = held.first(where: { failing.contains($0.check) }) {
                result = ComplianceResult(status: reason.status, checkedAt: result.checkedAt, failedCheck: reason.check, reason: reason.reason)
            }
        }
        return try record(identity, policy: policy, result: result, outcomes: after, remediations: remediations,
                          action: "compliance remediate")
    }

    /// The account's last recorded result, nil when it was never checked.
    /// - Throws: `.unknownAccount`.
    public func status(_ name: String) throws -> (AccountIdentity, ComplianceResult?) {
        let identity = try context.resolveAccount(name)
        return (identity, try context.state.complianceResults()[identity.accountId])
    }

    private func prepare(_ name: String) throws -> (AccountIdentity, [ComplianceCheck], Policy) {
        let identity = try context.resolveAccount(name)
        let policy = try context.enrollment.policy(of: identity.accountId)
        guard let checks = policy.compliance else {
            throw MAMError.invalidArguments("the policy of account \(identity.upn ?? identity.accountId) has no 'compliance' checks")
        }
        return (identity, checks, policy)
    }

    private func evaluator(_ identity: AccountIdentity, paths: [String]) throws -> ComplianceEvaluator {
        var directories = paths
        if directories.isEmpty {
            directories = try context.state.knownRoots()
                .filter { $0.accountId == identity.accountId && FileManager.default.fileExists(atPath: $0.path) }
                .map(\.path)
        }
        return ComplianceEvaluator(directories: directories)
    }

    private func record(_ identity: AccountIdentity, policy: Policy, result: ComplianceResult, outcomes: [ComplianceOutcome],
                        remediations: [ComplianceOutcome], action: String) throws -> ComplianceReport {
        try context.state.setComplianceResult(result, accountId: identity.accountId)
        context.stateDidChange()
        let rule = "compliance=\(result.status.rawValue)" + (result.failedCheck.map { ": \($0): \(result.reason)" } ?? "")
        let executable = ExecutableFile.current().path
        context.auditLog.record(.ofThisProcess(executable: executable, action: action, path: identity.accountId,
                                               owner: identity.accountId, decision: result.status == .compliant ? "allowed" : "denied",
                                               rule: rule))
        var wipe: WipeReport?
        if result.status == .notCompliant && policy.wipeOnNonCompliance {
            wipe = try context.enrollment.wipe(identity.accountId, roots: [])
            context.auditLog.record(.ofThisProcess(executable: executable, action: "wipe", path: identity.accountId,
                                                   owner: identity.accountId, decision: "allowed", rule: "wipeOnNonCompliance"))
        }
        context.auditLog.flush()
        context.complianceEvents?.complianceResultRecorded(account: identity, result: result, wiped: wipe != nil)
        return ComplianceReport(account: identity, result: result, outcomes: outcomes, remediations: remediations, wipe: wipe)
    }
}

extension ProtectionContext {
    /// Compliance checks, remediation and the last result (App Protection Conditional Access).
    public var compliance: ComplianceManager { ComplianceManager(context: self) }
}
