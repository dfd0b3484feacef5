import Foundation

/// What happens to a request the caller-aware rules would deny (policy key `protectionLevel`).
///
/// Mirrors the protection levels of Windows Information Protection (Block / Allow overrides /
/// Silent / Off) and the audit-or-block modes of endpoint DLP. The raw values are the names
/// used in policy JSON.
public enum ProtectionLevel: String, CaseIterable, PolicyName, Sendable, Codable {
    /// Denied (EACCES, EPERM for owner changes, exit 77 in the CLI) and recorded in the audit log.
    case block
    /// Allowed, and recorded in the audit log as a would-be denial.
    case audit
    /// No caller-aware enforcement and no record (the default: today's behaviour).
    case off
}
