import Foundation

/// An account registered in the state database (a row of `accounts`).
///
/// `accountId` (a GUID) and `upn` are stored in canonical lowercased form
/// (`AccountIdentity.canonical`). `managed` says whether the account is enrolled (its files are
/// encrypted); `policyJSON` is the account's policy document, opaque to the store; `wipedAt`
/// is the Unix time (seconds) of its last selective wipe, nil if never wiped.
///
/// An account enrolled by its UPN alone is keyed by that UPN: `accountId` is then the UPN
/// (the owner its files carry and its keys are bound to) and `objectId` holds the real
/// accountId (GUID) once an enroll names both. `tenantId` is the TID of a homeAccountId
/// (`OID.TID`) the account was enrolled with. `registered` is false after `unenroll` without
/// `--keep-registered` (the row, its keys and its files stay so a later wipe still finds them).
public struct AccountRecord: Sendable, Equatable {
    public var accountId: String
    public var upn: String?
    public var managed: Bool
    public var policyJSON: String?
    public var wipedAt: Int64?
    /// Canonical tenant GUID, if known.
    public var tenantId: String?
    /// Canonical accountId (GUID) of an account keyed by its UPN, once known.
    public var objectId: String?
    /// Whether the account is registered (listed by the reference's registeredAccounts).
    public var registered: Bool

    public init(accountId: String, upn: String? = nil, managed: Bool, policyJSON: String? = nil, wipedAt: Int64? = nil,
                tenantId: String? = nil, objectId: String? = nil, registered: Bool = true) {
        self.accountId = accountId
        self.upn = upn
        self.managed = managed
        self.policyJSON = policyJSON
        self.wipedAt = wipedAt
        self.tenantId = tenantId
        self.objectId = objectId
        self.registered = registered
    }

    /// True when the account is keyed by its UPN (enrolled without an accountId).
    public var isKeyedByUPN: Bool { !AccountIdentity.isAccountId(accountId) }

    /// The account's directory object ID when known: `accountId` for a GUID-keyed account,
    /// `objectId` for one keyed by its UPN; nil while a UPN-keyed account's is not known.
    public var knownAccountId: String? { isKeyedByUPN ? objectId : accountId }

    /// Every canonical name the account answers to: its key, UPN and known accountId.
    public var names: Set<String> {
        Set([accountId, upn, objectId].compactMap { $0 })
    }

    /// The account's identity (accountId + UPN).
    public var identity: AccountIdentity {
        AccountIdentity(uncheckedAccountId: accountId, upn: upn)
    }
}

/// A directory tree mamfs has worked on (a row of `known_roots`); selective wipe walks these
/// paths to find the files an account owns.
public struct KnownRoot: Sendable, Equatable {
    /// What the path is.
    public enum Kind: String, Sendable, CaseIterable {
        /// The backing directory of a mount (holds the protected files as stored).
        case backing
        /// A directory holding protected files outside a mount (`mamfs protect` targets).
        case protected
        /// A file-provider root or replica.
        case root
    }

    /// Absolute, standardized path.
    public var path: String
    public var kind: Kind
    /// Canonical accountId of the account the root belongs to, if any (e.g. the mount's account).
    public var accountId: String?
    /// Unix time (seconds) the root was first recorded.
    public var addedAt: Int64?

    public init(path: String, kind: Kind, accountId: String? = nil, addedAt: Int64? = nil) {
        self.path = path
        self.kind = kind
        self.accountId = accountId
        self.addedAt = addedAt
    }
}
