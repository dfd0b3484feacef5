import Foundation
import MAMProtection

/// Which provider semantics a local root uses.
public enum ProviderKind: String, Codable, Sendable {
    /// `NSFileProviderExtension`: placeholders, materialized on open.
    case nonReplicated = "non-replicated"
    /// `NSFileProviderReplicatedExtension`: a full replica synced with versions.
    case replicated
}

/// What a local root is bound to, kept in its database so the CLI can find the remote and the
/// account from a path alone.
public struct ProviderConfiguration: Codable, Equatable, Sendable {
    public var kind: ProviderKind
    /// The remote's location (for `LocalDirectoryRemote`: its root path).
    public var remote: String
    /// Canonical accountId of the domain ("" = unmanaged).
    public var accountId: String
    /// The remote's `volumeIdentity()` when first synced.
    public var remoteVolume: String?

    public init(kind: ProviderKind, remote: String, accountId: String, remoteVolume: String? = nil) {
        self.kind = kind
        self.remote = remote
        self.accountId = accountId
        self.remoteVolume = remoteVolume
    }
}

/// The stat values that tell whether a local file changed since the provider last wrote or
/// uploaded it.
struct LocalStamp: Equatable, Sendable {
    var inode: UInt64
    var size: Int64
    var mtime: Int64

    init(inode: UInt64, size: Int64, mtime: Int64) {
        self.inode = inode
        self.size = size
        self.mtime = mtime
    }

    init(_ st: stat) {
        self.init(inode: UInt64(st.st_ino), size: Int64(st.st_size), mtime: FileSystem.mtimeNanoseconds(st))
    }

    /// `inode:size:mtime_ns`, the form kept in xattrs.
    var encoded: String { "\(inode):\(size):\(mtime)" }

    init?(encoded: String) {
        let parts = encoded.split(separator: ":")
        guard parts.count == 3, let i = UInt64(parts[0]), let s = Int64(parts[1]), let m = Int64(parts[2]) else { return nil }
        self.init(inode: i, size: s, mtime: m)
    }

    /// Same contents as far as stat can tell (size and mtime; the inode changes on an
    /// editor's save-by-rename, which is a change too).
    func sameContents(as other: LocalStamp) -> Bool { self == other }
}

/// One synced item of the replicated provider: the remote item as last seen and the local
/// file it was reconciled with.
struct ItemRecord: Equatable, Sendable {
    var identifier: ItemIdentifier
    var parent: ItemIdentifier
    var filename: String
    var type: ItemType
    var size: Int64
    var version: ItemVersion
    var owner: String
    /// Path relative to the local root.
    var localPath: String
    var local: LocalStamp
}

/// The provider's SQLite database (`ROOT/.mamfs-provider/provider.db`, WAL): the
/// configuration, the sync anchor, the item table, and the stable item identifiers
/// (`identities`, see ProviderDatabase+Identities).
///
/// Errors: what `SQLiteDatabase` throws (`MAMError.internalError`, `.system`).
final class ProviderDatabase: @unchecked Sendable {
    let database: SQLiteDatabase

    /// Opens (creating when `create`) the database of `layout`.
    init(layout: ProviderLayout, create: Bool) throws {
        if create { try layout.prepare() }
        database = try SQLiteDatabase(path: layout.databasePath, create: create)
        try database.execute("""
            CREATE TABLE IF NOT EXISTS config(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS items(
                identifier TEXT PRIMARY KEY,
                parent TEXT NOT NULL,
                filename TEXT NOT NULL,
                type TEXT NOT NULL,
                size INTEGER NOT NULL,
                content_version TEXT NOT NULL,
                metadata_version TEXT NOT NULL,
                owner TEXT NOT NULL,
                local_path TEXT NOT NULL,
                local_inode INTEGER NOT NULL,
                local_size INTEGER NOT NULL,
                local_mtime INTEGER NOT NULL);
            CREATE INDEX IF NOT EXISTS items_local_path ON items(local_path);
            """)
        try database.execute(Self.identitySchema)
    }

    func close() { database.close() }

    // MARK: Configuration

    func value(_ key: String) throws -> String? {
        try database.queryFirst("SELECT value FROM config WHERE key = ?", [.text(key)])?.string(0)
    }

    func setValue(_ key: String, _ value: String?) throws {
        if let value {
            try database.run("INSERT INTO config(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                             [.text(key), .text(value)])
        } else {
            try database.run("DELETE FROM config WHERE key = ?", [.text(key)])
        }
    }

    /// The stored configuration, nil for a root never configured.
    func configuration() throws -> ProviderConfiguration? {
        guard let kindText = try value("kind"), let kind = ProviderKind(rawValue: kindText),
              let remote = try value("remote"), let account = try value("account") else { return nil }
        return ProviderConfiguration(kind: kind, remote: remote, accountId: account, remoteVolume: try value("remote_volume"))
    }

    func setConfiguration(_ configuration: ProviderConfiguration) throws {
        try database.transaction {
            try setValue("kind", configuration.kind.rawValue)
            try setValue("remote", configuration.remote)
            try setValue("account", configuration.accountId)
            try setValue("remote_volume", configuration.remoteVolume)
        }
    }

    /// The sync anchor: the number of completed sync passes.
    func anchor() throws -> Int64 { Int64(try value("anchor") ?? "0") ?? 0 }

    func advanceAnchor() throws {
        try database.transaction {
            try setValue("anchor", String(try anchor() + 1))
            try setValue("last_sync", String(Int64(Date().timeIntervalSince1970)))
        }
    }

    // MARK: Items

    private static let columns = "identifier, parent, filename, type, size, content_version, metadata_version, owner, local_path, local_inode, local_size, local_mtime"

    func allItems() throws -> [ItemRecord] {
        try database.query("SELECT \(Self.columns) FROM items").compactMap(Self.record)
    }

    func item(localPath: String) throws -> ItemRecord? {
        try database.queryFirst("SELECT \(Self.columns) FROM items WHERE local_path = ?", [.text(localPath)]).flatMap(Self.record)
    }

    func upsert(_ r: ItemRecord) throws {
        try database.run("""
            INSERT INTO items(\(Self.columns)) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(identifier) DO UPDATE SET parent = excluded.parent, filename = excluded.filename,
              type = excluded.type, size = excluded.size, content_version = excluded.content_version,
              metadata_version = excluded.metadata_version, owner = excluded.owner, local_path = excluded.local_path,
              local_inode = excluded.local_inode, local_size = excluded.local_size, local_mtime = excluded.local_mtime
            """, [.text(r.identifier.rawValue), .text(r.parent.rawValue), .text(r.filename), .text(r.type.rawValue),
                  .integer(r.size), .text(r.version.contentVersion), .text(r.version.metadataVersion), .text(r.owner),
                  .text(r.localPath), .integer(Int64(bitPattern: r.local.inode)), .integer(r.local.size), .integer(r.local.mtime)])
    }

    func remove(_ identifier: ItemIdentifier) throws {
        try database.run("DELETE FROM items WHERE identifier = ?", [.text(identifier.rawValue)])
    }

    private static func record(_ row: SQLiteRow) -> ItemRecord? {
        guard let id = row.string(0), let parent = row.string(1), let name = row.string(2),
              let typeText = row.string(3), let type = ItemType(rawValue: typeText), let size = row.int64(4),
              let cv = row.string(5), let mv = row.string(6), let owner = row.string(7), let local = row.string(8),
              let inode = row.int64(9), let localSize = row.int64(10), let mtime = row.int64(11) else { return nil }
        return ItemRecord(identifier: ItemIdentifier(id), parent: ItemIdentifier(parent), filename: name, type: type,
                          size: size, version: ItemVersion(contentVersion: cv, metadataVersion: mv), owner: owner,
                          localPath: local, local: LocalStamp(inode: UInt64(bitPattern: inode), size: localSize, mtime: mtime))
    }
}
