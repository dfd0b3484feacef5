import Foundation

/// The last compliance result per account (table `compliance_results`, schema version 4).
extension StateStore {
    /// Version 4: one row per account, replaced by every check.
    static let schemaV4 = """
        CREATE TABLE IF NOT EXISTS compliance_results(
            account_id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            checked_at_ms INTEGER NOT NULL,
            failed_check TEXT,
            reason TEXT NOT NULL);
        """

    /// Records `result` as the account's last compliance result (canonical accountId).
    public func setComplianceResult(_ result: ComplianceResult, accountId: String) throws {
        try database.run("""
            INSERT INTO compliance_results(account_id, status, checked_at_ms, failed_check, reason) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(account_id) DO UPDATE SET status = excluded.status, checked_at_ms = excluded.checked_at_ms,
                failed_check = excluded.failed_check, reason = excluded.reason
            """,
            [.text(AccountIdentity.canonical(accountId)), .text(result.status.rawValue),
             .integer(Int64((result.checkedAt.timeIntervalSince1970 * 1000).rounded())),
             SQLiteValue(result.failedCheck), .text(result.reason)])
    }

    /// Every account's last compliance result (canonical accountId -> result).
    /// - Throws: `MAMError.damagedDatabase` for a malformed row.
    public func complianceResults() throws -> [String: ComplianceResult] {
        var results: [String: ComplianceResult] = [:]
        for row in try database.query("SELECT account_id, status, checked_at_ms, failed_check, reason FROM compliance_results") {
            guard let id = row.string(0), let status = row.string(1).flatMap(ComplianceStatus.init(rawValue:)),
                  let milliseconds = row.int64(2), let reason = row.string(4) else {
                throw MAMError.damagedDatabase("malformed row in compliance_results (restore the state from a backup)")
            }
            results[id] = ComplianceResult(status: status, checkedAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000),
                                           failedCheck: row.string(3), reason: reason)
        }
        return results
    }
}
