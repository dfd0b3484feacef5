import Foundation

/// Answers the policy questions of the reference SDK for any account, given a way to look up
/// the policy of managed accounts.
///
/// The lookup receives a canonical (lowercased) accountId and returns the policy of that
/// account if it is managed (registered and enrolled), nil if it is unmanaged or unknown. The
/// empty accountId is the unmanaged identity and is never looked up. Unmanaged accounts have no
/// policy, so every restriction is lifted for them. All accountId comparisons are
/// case-insensitive.
public struct PolicyEvaluator: Sendable {
    private let lookup: @Sendable (String) -> Policy?

    /// The policy of every managed account, when the evaluator was made from a table
    /// (`init(policies:)`); nil for one made from a lookup, whose accounts are not known.
    public let managedPolicies: [Policy]?

    /// Creates an evaluator from a lookup `accountId -> policy of a managed account`, called
    /// with canonical (lowercased) accountIds.
    public init(lookup: @escaping @Sendable (String) -> Policy?) {
        self.lookup = lookup
        managedPolicies = nil
    }

    /// Creates an evaluator from a fixed table of managed accounts; keys may be in any case.
    public init(policies: [String: Policy]) {
        var table: [String: Policy] = [:]
        for (accountId, policy) in policies {
            table[AccountIdentity.canonical(accountId)] = policy
        }
        let frozen = table
        self.lookup = { frozen[$0] }
        managedPolicies = Array(table.values)
    }

    /// The policy of a managed account, or nil for the empty identity and unmanaged or unknown
    /// accounts. Mirrors `IntuneMAMPolicyManager policyForAccountId:`.
    public func policy(forAccountId accountId: String) -> Policy? {
        let canonical = AccountIdentity.canonical(accountId)
        if canonical.isEmpty { return nil }
        return lookup(canonical)
    }

    /// True when `accountId` is managed (has a policy).
    public func isManaged(accountId: String) -> Bool {
        policy(forAccountId: accountId) != nil
    }

    /// Whether files saved by the account must be encrypted; false for the empty identity and
    /// unmanaged accounts. Mirrors `IntuneMAMPolicy isFileEncryptionRequired`.
    public func isFileEncryptionRequired(accountId: String) -> Bool {
        policy(forAccountId: accountId)?.fileEncryptionRequired ?? false
    }

    /// Whether a file provider encrypts the local copies it hands out for the account; false for
    /// the empty identity and unmanaged accounts. Mirrors `IntuneMAMPolicy shouldFileProviderEncryptFiles`.
    public func shouldFileProviderEncryptFiles(accountId: String) -> Bool {
        policy(forAccountId: accountId)?.fileProviderEncryptFiles ?? false
    }

    /// Whether `receiver` may receive an incoming file owned by `fileOwner`.
    ///
    /// - Parameters:
    ///   - fileOwner: the file's owner accountId; nil for an untagged file, "" for a file tagged
    ///     with the unmanaged identity.
    ///   - receiver: the accountId that would receive the file.
    /// - Returns: true when the receiver is unmanaged or owns the file itself; otherwise by the
    ///   receiver's `receiveData`: `.all` true, `.managedOnly` true only when the owner is a
    ///   managed account, `.none` false.
    ///
    /// Mirrors `IntuneMAMPolicy canReceiveSharedFile:` (the path variant resolves the owner with
    /// `IntuneMAMFileProtectionManager protectionInfoForFile:` and calls this).
    public func canReceiveSharedFile(fileOwner: String?, receiver: String) -> Bool {
        guard let policy = policy(forAccountId: receiver) else { return true }
        if let fileOwner, AccountIdentity.canonical(fileOwner) == AccountIdentity.canonical(receiver) {
            return true
        }
        switch policy.receiveData {
        case .all: return true
        case .managedOnly: return fileOwner.map { isManaged(accountId: $0) } ?? false
        case .none: return false
        }
    }

    /// Whether data owned by `dataOwner` may be saved to `location`. Uses the policy of the
    /// data's owner; an unmanaged owner (or "") may save anywhere.
    /// Mirrors `IntuneMAMPolicy isSaveToAllowedForLocation:withAccountId:`.
    public func isSaveToAllowed(location: SaveLocation, dataOwner: String) -> Bool {
        guard let policy = policy(forAccountId: dataOwner) else { return true }
        return policy.saveToLocations.contains(location)
    }

    /// Whether `receiver` may open data from `location`. Uses the policy of the receiving
    /// account; an unmanaged receiver (or "") may open from anywhere.
    /// Mirrors `IntuneMAMPolicy isOpenFromAllowedForLocation:withAccountId:`.
    public func isOpenFromAllowed(location: OpenLocation, receiver: String) -> Bool {
        guard let policy = policy(forAccountId: receiver) else { return true }
        return policy.openFromLocations.contains(location)
    }
}
