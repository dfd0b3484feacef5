import Foundation
import MAMProtection

/// A file-provider domain: one remote store seen by one account (mirrors
/// `NSFileProviderDomain` with the MAM rule that a domain belongs to exactly one identity).
///
/// Rule "every item handed to the system is tagged with its owner's account"
/// (`protectFileProviderItem(item, accountId)`) lives here, in `protectFileProviderItem`:
/// the only way to make a `FileProviderItem` from a `RemoteItem`.
/// Rule "enumerations run under the account of the domain"
/// (`setAccountId(onFileProviderEnumerator)`) lives in `enumerator(for:)`.
public struct FileProviderDomain: Sendable {
    /// Canonical accountId of the domain's account ("" = unmanaged).
    public let accountId: String
    /// The cloud side.
    public let remote: any RemoteStore
    /// The protection state (policy of the account, keys for its files).
    public let context: ProtectionContext

    /// Binds `remote` to the account named `account` (accountId or UPN, "" = unmanaged).
    /// - Throws: `.unknownAccount` for an unregistered UPN, `.invalidArguments` for a malformed name.
    public init(account: String, remote: any RemoteStore, context: ProtectionContext) throws {
        self.accountId = try context.resolveOwner(account)
        self.remote = remote
        self.context = context
    }

    /// Tags an item with the domain's account. Mirrors
    /// `IntuneMAMFileProtectionManager protectFileProviderItem:forAccountId:`.
    public func protectFileProviderItem(_ item: RemoteItem) -> FileProviderItem {
        FileProviderItem(remote: item, owner: accountId)
    }

    /// An enumerator of `container` that runs under the domain's account. Mirrors
    /// `IntuneMAMFileProtectionManager setAccountId:onFileProviderEnumerator:` (the enumerator
    /// is created with the identity instead of having it set later, so it can never run
    /// without one).
    public func enumerator(for container: ItemIdentifier) -> FileProviderEnumerator {
        FileProviderEnumerator(container: container, accountId: accountId, domain: self)
    }
}

/// Lists the items of one container for the local side (mirrors `NSFileProviderEnumerator`).
public struct FileProviderEnumerator: Sendable {
    /// The container enumerated.
    public let container: ItemIdentifier
    /// The identity the enumeration runs under (the domain's account).
    public let accountId: String
    let domain: FileProviderDomain

    /// The direct children of the container, each tagged with `accountId`.
    /// Mirrors `enumerateItemsForObserver:startingAtPage:`.
    /// - Throws: `RemoteError` (`.unreachable`, `.notFound`).
    public func enumerateItems() throws -> [FileProviderItem] {
        try domain.remote.enumerate(container: container).map(domain.protectFileProviderItem)
    }

    /// Every item below the container, parents first, each tagged with `accountId`.
    /// - Throws: `RemoteError`.
    public func enumerateTree() throws -> [FileProviderItem] {
        try domain.remote.enumerateTree(from: container).map(domain.protectFileProviderItem)
    }
}
