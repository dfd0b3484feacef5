import Foundation
import MAMProtection

/// One item handed to the local side (mirrors `NSFileProviderItem`): identity, place, type,
/// size, versions and the owner the item is protected for.
///
/// Items are only made by a `FileProviderDomain` (`protectFileProviderItem`), so every item
/// carries the owner accountId of the domain it came from.
public struct FileProviderItem: Hashable, Codable, Sendable {
    /// `NSFileProviderItem.itemIdentifier`: the stable identifier in an item a provider
    /// returns (kept across renames and moves), the store's identifier in one an enumerator
    /// lists (see `ItemIdentifier`).
    public var itemIdentifier: ItemIdentifier
    /// `NSFileProviderItem.parentItemIdentifier`, of the same kind as `itemIdentifier`.
    public var parentItemIdentifier: ItemIdentifier
    /// `NSFileProviderItem.filename`.
    public var filename: String
    /// File, directory or symlink.
    public var type: ItemType
    /// `NSFileProviderItem.documentSize`: plaintext bytes (the remote size).
    public var size: Int64
    /// `NSFileProviderItemVersion.contentVersion`.
    public var contentVersion: String
    /// `NSFileProviderItemVersion.metadataVersion`.
    public var metadataVersion: String
    /// Canonical accountId of the owner ("" = unmanaged), set by `protectFileProviderItem`.
    public var ownerAccountId: String

    /// Both versions together.
    public var itemVersion: ItemVersion { ItemVersion(contentVersion: contentVersion, metadataVersion: metadataVersion) }

    init(remote: RemoteItem, owner: String) {
        itemIdentifier = remote.identifier
        parentItemIdentifier = remote.parentIdentifier
        filename = remote.filename
        type = remote.type
        size = remote.size
        contentVersion = remote.version.contentVersion
        metadataVersion = remote.version.metadataVersion
        ownerAccountId = owner
    }
}
