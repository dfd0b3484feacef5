import Foundation

extension StateStore {
    /// The `meta` key of the allowed-accounts list (a JSON array of canonical names).
    static let allowedAccountsKey = "mamfs.allowed_accounts"

    /// The state-wide allowed-accounts list: canonical accountIds and UPNs, in the order they
    /// were set; empty when unset (every account is allowed).
    /// Mirrors the allowed accounts of the reference SDK (the only accounts that may be enrolled).
    /// - Throws: `MAMError.internalError` for a stored value that is not a JSON array of strings.
    public func allowedAccounts() throws -> [String] {
        guard let data = try metaValue(Self.allowedAccountsKey) else { return [] }
        guard let names = (try? JSONSerialization.jsonObject(with: data)) as? [String] else {
            throw MAMError.internalError("malformed allowed-accounts list in the state")
        }
        return names
    }

    /// Replaces the allowed-accounts list; an empty `names` removes it (every account allowed).
    /// Each name is an accountId, a UPN or a homeAccountId `OID.TID` (stored as its OID); the
    /// stored list is canonical (lowercased) without repeats.
    /// - Returns: the list as stored.
    /// - Throws: `MAMError.invalidArguments` for a name that is none of these forms.
    @discardableResult
    public func setAllowedAccounts(_ names: [String]) throws -> [String] {
        var stored: [String] = []
        for name in names {
            let parsed = try AccountIdentity.parseName(name)
            guard parsed.isAccountId || parsed.isUPN else {
                throw MAMError.invalidArguments("'\(InputQuote.short(name))' is neither an accountId (GUID), a UPN nor a homeAccountId (OID.TID)")
            }
            if !stored.contains(parsed.key) { stored.append(parsed.key) }
        }
        if stored.isEmpty {
            try deleteMetaValue(Self.allowedAccountsKey)
        } else {
            try setMetaValue(try JSONSerialization.data(withJSONObject: stored), forKey: Self.allowedAccountsKey)
        }
        return stored
    }
}
