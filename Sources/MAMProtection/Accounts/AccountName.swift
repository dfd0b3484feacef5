import Foundation

/// An account as a person or script names it: an accountId (GUID), a UPN (`user@contoso.com`),
/// or a homeAccountId `OID.TID` (the object ID and the tenant ID, two GUIDs joined by '.').
///
/// The one parser every verb and lookup uses (`AccountIdentity.parseName`). A homeAccountId
/// names the account by its OID (the accountId); its TID is the tenant, recorded on enrollment
/// and checked against the state's record when the state knows one.
public struct AccountName: Equatable, Sendable {
    /// The canonical (lowercased) name to look the account up by: the accountId, the OID of a
    /// homeAccountId, the UPN, or whatever else was given (canonical; "" for the unmanaged identity).
    public let key: String
    /// The canonical tenant GUID of a homeAccountId; nil for every other form.
    public let tenantId: String?

    public init(key: String, tenantId: String? = nil) {
        self.key = AccountIdentity.canonical(key)
        self.tenantId = tenantId.map(AccountIdentity.canonical)
    }

    /// True when `key` is an accountId (a GUID, also the OID of a homeAccountId).
    public var isAccountId: Bool { AccountIdentity.isAccountId(key) }
    /// True when `key` is a UPN.
    public var isUPN: Bool { AccountIdentity.isUPN(key) }
}

extension AccountIdentity {
    /// Parses how an account is named: `OID.TID` (two GUIDs joined by one '.', any case)
    /// becomes key OID and tenant TID; any other text is its canonical self as key (an
    /// accountId, a UPN, "" or a name the caller rejects).
    /// - Throws: `MAMError.invalidArguments` for a name without '@' that has a '.' and a GUID
    ///   on one side but is not two GUIDs joined by one '.' (a malformed homeAccountId).
    public static func parseName(_ name: String) throws -> AccountName {
        let text = canonical(name)
        guard !text.contains("@"), text.contains(".") else { return AccountName(key: text) }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if parts.count == 2, isAccountId(parts[0]), isAccountId(parts[1]) {
            return AccountName(key: parts[0], tenantId: parts[1])
        }
        if parts.contains(where: isAccountId) {
            throw MAMError.invalidArguments("'\(InputQuote.short(name))' is not a homeAccountId (expected OID.TID: two GUIDs joined by '.')")
        }
        return AccountName(key: text)
    }
}
