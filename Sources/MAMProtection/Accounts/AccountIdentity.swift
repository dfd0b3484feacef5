import Foundation

/// The identity of an account: its directory object ID (`accountId`, a GUID) and, when known,
/// its user principal name (`upn`, e.g. `user@contoso.com`).
///
/// Mirrors the accountId / UPN pair of the Intune App SDK. Comparison is case-insensitive:
/// identifiers are stored in their canonical (lowercased) form, so two spellings of the same
/// account compare equal. The empty accountId means "no identity" (unmanaged).
public struct AccountIdentity: Hashable, Sendable, CustomStringConvertible {
    /// Canonical (lowercased) accountId; empty for the unmanaged identity.
    public let accountId: String
    /// Canonical (lowercased) UPN, if known.
    public let upn: String?

    /// The unmanaged identity (empty accountId).
    public static let unmanaged = AccountIdentity(uncheckedAccountId: "", upn: nil)

    /// Creates an identity from an accountId (GUID) and an optional UPN.
    /// - Throws: `MAMError.invalidArguments` when `accountId` is not a GUID or `upn` is not `name@domain`.
    public init(accountId: String, upn: String? = nil) throws {
        guard AccountIdentity.isAccountId(accountId) else {
            throw MAMError.invalidArguments("'\(InputQuote.short(accountId))' is not an accountId (expected a GUID such as 8c7f3e1a-0000-4000-8000-000000000001)")
        }
        if let upn, !AccountIdentity.isUPN(upn) {
            throw MAMError.invalidArguments("'\(InputQuote.short(upn))' is not a UPN (expected name@domain)")
        }
        self.accountId = AccountIdentity.canonical(accountId)
        self.upn = upn.map(AccountIdentity.canonical)
    }

    init(uncheckedAccountId: String, upn: String?) {
        self.accountId = AccountIdentity.canonical(uncheckedAccountId)
        self.upn = upn.map(AccountIdentity.canonical)
    }

    /// True for the empty (unmanaged) identity.
    public var isUnmanagedIdentity: Bool { accountId.isEmpty }

    public var description: String {
        if accountId.isEmpty { return "(unmanaged)" }
        if let upn { return "\(upn) (\(accountId))" }
        return accountId
    }

    /// Canonical form used for storage and comparison: lowercased, surrounding whitespace removed.
    /// A name that is canonical already (ASCII without capitals, not starting or ending in a
    /// blank: every owner in a header, every accountId mamfs stores) is returned as it is,
    /// without allocating; it is asked on every decision a mount makes.
    public static func canonical(_ name: String) -> String {
        if isCanonicalASCII(name) { return name }
        return name.trimmingWhitespace().lowercased()
    }

    /// Whether `name` is ASCII with no capital letter and no tab or space at either end (its
    /// canonical form then is itself).
    private static func isCanonicalASCII(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes -> Bool in
            guard let first = bytes.first, let last = bytes.last else { return true }
            if first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 { return false }
            for byte in bytes where byte >= 0x80 || (byte >= 0x41 && byte <= 0x5A) { return false }
            return true
        }
    }

    /// True when `name` is a GUID in 8-4-4-4-12 hexadecimal form (any case).
    public static func isAccountId(_ name: String) -> Bool {
        let parts = name.trimmingWhitespace().split(separator: "-", omittingEmptySubsequences: false)
        let lengths = [8, 4, 4, 4, 12]
        guard parts.count == lengths.count else { return false }
        for (part, length) in zip(parts, lengths) {
            guard part.count == length, part.allSatisfy({ $0.isHexDigit }) else { return false }
        }
        return true
    }

    /// True when `name` looks like a UPN: `local@domain` with non-empty parts, no blank of any
    /// kind inside, no control character (C0, DEL, C1) and no invisible format character
    /// (bidi overrides, zero-width ones: Unicode category Cf): a UPN is printed by `accounts`,
    /// `info` and the logs, where an escape sequence would drive the reader's terminal and a
    /// bidi override would show another name.
    public static func isUPN(_ name: String) -> Bool {
        let trimmed = name.trimmingWhitespace()
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        let printable = trimmed.unicodeScalars.allSatisfy { !InputQuote.isInvisible($0) && !$0.properties.isWhitespace }
        return parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty && printable
    }
}
