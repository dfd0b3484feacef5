import Foundation
import MAMSystem
import MAMProtection

/// What `mamfs provider status PATH [--json]` shows about one local path.
public struct ProviderItemStatus: Codable, Equatable, Sendable {
    /// The path asked about.
    public var path: String
    /// The provider's local root.
    public var root: String
    /// Which provider manages the root.
    public var kind: ProviderKind
    /// The item's stable identifier (kept across renames and moves, see `ItemIdentifier`), nil
    /// for a local item not uploaded yet.
    public var itemIdentifier: ItemIdentifier?
    /// The stable identifier of the remote parent, when known (replicated only).
    public var parentItemIdentifier: ItemIdentifier?
    public var filename: String
    public var type: ItemType
    /// Plaintext size in bytes (for a placeholder: the remote size).
    public var size: Int64
    /// The remote content version the local copy is of.
    public var contentVersion: String?
    /// The remote metadata version last seen (replicated only).
    public var metadataVersion: String?
    /// True when the contents are present locally (false for a placeholder).
    public var materialized: Bool
    /// True when the local copy has changes the remote does not have yet.
    public var pendingUpload: Bool
    /// The item's owner: the domain's account ("" = unmanaged).
    public var owner: String
    /// The owner in the local file's header (nil when untagged or not a file).
    public var localOwner: String?
    /// True when the local copy is encrypted.
    public var encrypted: Bool
    /// The root's upload queue (non-replicated roots; nil otherwise).
    public var queue: UploadQueueStatus? = nil

    static func nonReplicated(localPath: String, layout: ProviderLayout, database: ProviderDatabase,
                              accountId: String) throws -> ProviderItemStatus {
        guard let st = FileSystem.lstatPath(localPath), let type = FileSystem.itemType(st) else {
            throw MAMError.fileNotFound(localPath)
        }
        guard layout.relativePath(of: localPath) != nil else {
            throw MAMError.invalidArguments("\(localPath) is not inside \(layout.root)")
        }
        let attributes = LocalItemAttributes.read(path: localPath)
        let header = type == .file ? Self.header(localPath) : nil
        let materialized = !(attributes?.isPlaceholder ?? false)
        var size = attributes?.size ?? 0
        if materialized, type == .file, let plain = try? ProtectedFileContent.plaintextSize(storedSize: Int64(st.st_size), header: header) {
            size = plain
        }
        return ProviderItemStatus(
            path: localPath, root: layout.root, kind: .nonReplicated,
            itemIdentifier: attributes.map { database.stableIdentifier(ofStore: $0.identifier) },
            parentItemIdentifier: nil, filename: PathName.lastComponent(of: localPath), type: type, size: size,
            contentVersion: attributes?.contentVersion, metadataVersion: nil, materialized: materialized,
            pendingUpload: type == .file && (attributes.map { $0.hasLocalChanges(st) } ?? true),
            owner: accountId, localOwner: header?.owner, encrypted: header?.isEncrypted ?? false)
    }

    static func replicated(localPath: String, layout: ProviderLayout, database: ProviderDatabase, accountId: String) throws -> ProviderItemStatus {
        guard let st = FileSystem.lstatPath(localPath), let type = FileSystem.itemType(st) else {
            throw MAMError.fileNotFound(localPath)
        }
        guard let relative = layout.relativePath(of: localPath) else {
            throw MAMError.invalidArguments("\(localPath) is not inside \(layout.root)")
        }
        let row = try database.item(localPath: relative)
        let header = type == .file ? Self.header(localPath) : nil
        var size = Int64(0)
        if type == .file { size = (try? ProtectedFileContent.plaintextSize(storedSize: Int64(st.st_size), header: header)) ?? 0 }
        return ProviderItemStatus(
            path: localPath, root: layout.root, kind: .replicated,
            itemIdentifier: row.map { database.stableIdentifier(ofStore: $0.identifier) },
            parentItemIdentifier: row.map { database.stableIdentifier(ofStore: $0.parent) }, filename: PathName.lastComponent(of: localPath), type: type, size: size,
            contentVersion: row?.version.contentVersion, metadataVersion: row?.version.metadataVersion, materialized: true,
            pendingUpload: type != .directory && (row.map { $0.local != LocalStamp(st) } ?? true),
            owner: accountId, localOwner: header?.owner, encrypted: header?.isEncrypted ?? false)
    }

    private static func header(_ path: String) -> ProtectedFileHeader? {
        let opened: FileDescriptor
        do {
            opened = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            errno = error.rawValue
            return nil
        }
        let fd = opened.rawValue
        return (try? ProtectedFileHeader.read(fd: fd)) ?? nil
    }
}
