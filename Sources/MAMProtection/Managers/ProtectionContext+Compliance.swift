import Foundation

/// Told of every compliance result recorded (`ProtectionContext.complianceEvents`): the one
/// place a publisher (a desktop notification, a bus signal) hooks in.
public protocol ComplianceEventSink: AnyObject, Sendable {
    /// `result` was recorded as `account`'s last compliance result; `wiped` says whether it
    /// started the account's selective wipe (`wipeOnNonCompliance`).
    func complianceResultRecorded(account: AccountIdentity, result: ComplianceResult, wiped: Bool)
}

extension ProtectionContext {
    /// The directory this context works on, for the gate's `encryptedBackingDevice` check: a
    /// mount's backing directory, the directory of the CLI's file. nil: none known (the gate
    /// then relies on the last recorded result alone).
    public var complianceSite: String? {
        get { withLock { site } }
        set { withLock { site = newValue; siteDevice = nil } }
    }

    /// Receives every compliance result this context records; nil by default.
    public var complianceEvents: ComplianceEventSink? {
        get { withLock { events } }
        set { withLock { events = newValue } }
    }

    /// Whether a gate refusal's audit record is written at once (the CLI, which exits soon) or
    /// may be counted into a burst (a mount: false).
    public var flushesGateRefusalRecords: Bool {
        get { withLock { flushesGateRefusals } }
        set { withLock { flushesGateRefusals = newValue } }
    }

    /// The account's last compliance result, from the cache (refreshed with the state).
    public func lastComplianceResult(accountId: String) -> ComplianceResult? {
        withLock { complianceResults[AccountIdentity.canonical(accountId)] }
    }

    /// The compliance gate, asked before every account key is handed out (`AccountKeyStore`):
    /// nothing for an account whose policy has no `compliance`; otherwise the refusal of
    /// `ComplianceGate.refusal`, recorded in the audit log (action `unwrap-key`, decision
    /// `denied`, rule `compliance=...`).
    /// - Throws: `MAMError.policyDenied` ("not compliant: CHECK: REASON", "compliance result
    ///   older than ...", "compliance never checked ...": exit 77, EACCES through a mount).
    public func requireKeyAccess(accountId: String) throws {
        let id = AccountIdentity.canonical(accountId)
        guard let policy = policyEvaluator.policy(forAccountId: id), policy.compliance != nil else { return }
        let result = lastComplianceResult(accountId: id)
        let shown = accountRecord(id)?.upn ?? id
        guard let refusal = ComplianceGate.refusal(policy: policy, result: result, now: Date(), account: shown,
                                                   siteDevice: { [self] in siteDeviceOutcome() }) else { return }
        let where_ = complianceSite ?? id
        auditLog.record(.ofThisProcess(executable: ExecutableFile.current().path, action: "unwrap-key", path: where_,
                                       owner: id, decision: "denied", rule: refusal.rule))
        if flushesGateRefusalRecords { auditLog.flush() }
        throw MAMError.policyDenied("account \(shown): \(refusal.message)")
    }

    /// Unwraps the account's newest key through the gate (what `mount --account` does before
    /// it starts, so a refused account is refused at once rather than at its first file).
    /// - Throws: what `requireKeyAccess` throws; `.keyUnavailable` when it has no key.
    public func requireAccountKey(accountId: String) throws {
        _ = try keys.currentKey(accountId: accountId)
    }

    private func siteDeviceOutcome() -> ComplianceOutcome? {
        guard let directory = complianceSite else { return nil }
        if let known = withLock({ siteDevice }) { return known }
        let outcome = EncryptedDeviceCheck.evaluate(directory: directory)
        withLock { if site == directory { siteDevice = outcome } }
        return outcome
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        complianceLock.lock()
        defer { complianceLock.unlock() }
        return try body()
    }
}
