import Foundation

/// State-wide settings that are lists of names, kept in the `meta` table as JSON arrays.
extension StateStore {
    /// The `meta` key of the allowed-accounts list.
    static let allowedAccountsKey = "mamfs.allowed_accounts"
    /// The `meta` key of the scrub list.
    static let scrubKey = "mamfs.scrub"

    /// The state-wide allowed-accounts list: canonical accountIds and UPNs, in the order they
    /// were set; empty when unset (every account is allowed).
    /// Mirrors the allowed accounts of the reference SDK (the only accounts that may be enrolled).
    /// - Throws: `MAMError.damagedDatabase` for a stored value that is not a JSON array of strings.
    public func allowedAccounts() throws -> [String] { try stringList(Self.allowedAccountsKey) }

    /// Replaces the allowed-accounts list; an empty `names` removes it (every account allowed).
    /// Each name is an accountId, a UPN or a homeAccountId `OID.TID` (stored as its OID); the
    /// stored list is canonical (lowercased) without repeats.
    /// - Returns: the list as stored.
    /// - Throws: `MAMError.invalidArguments` for a name that is none of these forms.
    @discardableResult
    public func setAllowedAccounts(_ names: [String]) throws -> [String] {
        let keys = try names.map { name -> String in
            let parsed = try AccountIdentity.parseName(name)
            guard parsed.isAccountId || parsed.isUPN else {
                throw MAMError.invalidArguments("'\(InputQuote.short(name))' is neither an accountId (GUID), a UPN nor a homeAccountId (OID.TID)")
            }
            return parsed.key
        }
        return try setStringList(keys, forKey: Self.allowedAccountsKey)
    }

    /// The scrub list: values (UPNs, paths, any text) that diagnostics replace with a
    /// placeholder wherever they appear, compared case-insensitively; empty when unset.
    /// - Throws: `MAMError.damagedDatabase` for a stored value that is not a JSON array of strings.
    public func scrubValues() throws -> [String] { try stringList(Self.scrubKey) }

    /// Replaces the scrub list; an empty `values` removes it.
    /// - Returns: the list as stored (blank-trimmed, without empty values or repeats).
    @discardableResult
    public func setScrubValues(_ values: [String]) throws -> [String] {
        try setStringList(values.map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }, forKey: Self.scrubKey)
    }

    private func stringList(_ key: String) throws -> [String] {
        guard let data = try metaValue(key) else { return [] }
        guard let names = (try? JSONSerialization.jsonObject(with: data)) as? [String] else {
            throw MAMError.damagedDatabase("malformed \(key) list in the state (restore the state from a backup)")
        }
        return names
    }

    private func setStringList(_ values: [String], forKey key: String) throws -> [String] {
        var stored: [String] = []
        for value in values where !stored.contains(value) { stored.append(value) }
        if stored.isEmpty {
            try deleteMetaValue(key)
        } else {
            try setMetaValue(try JSONSerialization.data(withJSONObject: stored), forKey: key)
        }
        return stored
    }
}
