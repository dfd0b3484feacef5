import Foundation
import MAMProtection

/// One local change a non-replicated mount handed to the provider, as the upload queue keeps
/// it. Paths are relative to the local root (the names the objects had when the change was
/// recorded: a change replayed by another process finds its objects by these names).
public struct QueuedChange: Equatable, Sendable {
    /// What happened locally.
    public enum Kind: String, Sendable, Codable {
        /// A file's contents changed or it was created (`itemChanged`).
        case changed
        /// An item was unlinked or removed (`deleteItem` of `item` at `baseVersion`).
        case removed
        /// An object was renamed or moved to `path`, replacing `item` when set (`itemRenamed`).
        case renamed
        /// The objects at `path` and `otherPath` were exchanged (RENAME_EXCHANGE).
        case exchanged
        /// A directory was made at `path`.
        case madeDirectory = "mkdir"
        /// A hard link was made at `path` (uploaded as its own remote item).
        case linked = "link"
    }

    public var kind: Kind
    /// The object's path relative to the local root (for `.renamed`: its new path).
    public var path: String
    /// `.exchanged`: the second path; `.renamed`: the old path (nil in rows of older mamfs).
    public var otherPath: String?
    /// `.removed`: the removed item; `.renamed`: the item the rename replaced (nil: none).
    public var item: ItemIdentifier?
    /// The content version of `item` (nil: not a file, or unknown).
    public var baseVersion: String?
    /// `.renamed`: the replaced item's size when it was a file with item attributes (nil: a
    /// directory or an item without them).
    public var replacedSize: Int64?

    public init(kind: Kind, path: String, otherPath: String? = nil, item: ItemIdentifier? = nil,
                baseVersion: String? = nil, replacedSize: Int64? = nil) {
        self.kind = kind
        self.path = path
        self.otherPath = otherPath
        self.item = item
        self.baseVersion = baseVersion
        self.replacedSize = replacedSize
    }

    /// The attributes of the item a rename replaced, as `itemRenamed` takes them.
    var replacedAttributes: LocalItemAttributes? {
        guard kind == .renamed, let item, let replacedSize else { return nil }
        return LocalItemAttributes(identifier: item, contentVersion: baseVersion, size: replacedSize,
                                   isPlaceholder: false, stamp: nil)
    }
}

/// A row of the upload queue: the change, when it was recorded, and its retries.
public struct QueuedEntry: Equatable, Sendable {
    /// Position in the queue (increasing in recording order).
    public var sequence: Int64
    public var change: QueuedChange
    /// When it was recorded (seconds since 1970).
    public var created: Double
    /// Attempts that failed because the remote was unreachable.
    public var attempts: Int
    /// Not retried before this time (seconds since 1970); nil: at once.
    public var nextRetry: Double?
    /// The last failure's message.
    public var lastError: String?
}

/// What `mamfs provider status` shows about the queue.
public struct UploadQueueStatus: Codable, Equatable, Sendable {
    /// Changes waiting.
    public var count: Int
    /// Age in seconds of the oldest waiting change (nil: none).
    public var oldestAge: Double?
    /// When the next retry is due (seconds since 1970; nil: none scheduled).
    public var nextRetry: Double?
    /// The last failure's message (nil: none).
    public var lastError: String?
    /// The waiting changes in order: "KIND PATH" (exchange: "exchanged A B").
    public var entries: [String]
}

/// The durable upload queue of a non-replicated provider: the table `upload_queue` in the
/// provider database. Every change is recorded before its remote work starts and removed once
/// the remote has it, so a daemon restart (or kill -9) loses none.
///
/// Coalescing: a content change of a path that already has a content change waiting (not
/// running, no other kind of change recorded since) is not recorded again: the waiting one
/// uploads the contents as they are when it runs.
///
/// Errors: what `SQLiteDatabase` throws (`MAMError.internalError`, `.system`).
final class UploadQueue: @unchecked Sendable {
    private let database: SQLiteDatabase

    /// Opens the queue in `database` (the table is created when missing).
    init(_ database: ProviderDatabase) throws {
        self.database = database.database
        try self.database.execute("""
            CREATE TABLE IF NOT EXISTS upload_queue(
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                kind TEXT NOT NULL,
                path TEXT NOT NULL,
                other_path TEXT,
                item TEXT,
                base_version TEXT,
                replaced_size INTEGER,
                created REAL NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_retry REAL,
                last_error TEXT,
                running INTEGER NOT NULL DEFAULT 0);
            """)
    }

    /// Records `change`.
    /// - Returns: its sequence number, or that of the waiting change it was merged into.
    @discardableResult
    func append(_ change: QueuedChange, now: Double = Date().timeIntervalSince1970) throws -> Int64 {
        try database.transaction {
            if change.kind == .changed, let row = try database.queryFirst("""
                SELECT seq FROM upload_queue WHERE kind = 'changed' AND path = ? AND running = 0
                  AND seq > (SELECT COALESCE(MAX(seq), 0) FROM upload_queue WHERE kind != 'changed')
                ORDER BY seq LIMIT 1
                """, [.text(change.path)]), let seq = row.int64(0) {
                return seq
            }
            try database.run("""
                INSERT INTO upload_queue(kind, path, other_path, item, base_version, replaced_size, created)
                VALUES(?, ?, ?, ?, ?, ?, ?)
                """, [.text(change.kind.rawValue), .text(change.path), Self.optional(change.otherPath),
                      Self.optional(change.item?.rawValue), Self.optional(change.baseVersion),
                      change.replacedSize.map { .integer($0) } ?? .null, .real(now)])
            return try database.lastInsertRowID()
        }
    }

    /// Every waiting change, in order.
    func entries() throws -> [QueuedEntry] {
        try database.query("SELECT \(Self.columns) FROM upload_queue ORDER BY seq").compactMap(Self.entry)
    }

    /// The first waiting change.
    func first() throws -> QueuedEntry? {
        try database.queryFirst("SELECT \(Self.columns) FROM upload_queue ORDER BY seq LIMIT 1").flatMap(Self.entry)
    }

    /// Marks `sequence` as running (no content change is merged into it from now on).
    func markRunning(_ sequence: Int64) throws {
        try database.run("UPDATE upload_queue SET running = 1 WHERE seq = ?", [.integer(sequence)])
    }

    /// Marks every change as not running (a process that ran them ended).
    func clearRunning() throws {
        try database.run("UPDATE upload_queue SET running = 0 WHERE running != 0")
    }

    /// The remote has `sequence` (or it failed for good): it leaves the queue.
    func remove(_ sequence: Int64) throws {
        try database.run("DELETE FROM upload_queue WHERE seq = ?", [.integer(sequence)])
    }

    /// `sequence` failed because the remote is unreachable: one more attempt, retried at
    /// `nextRetry` (seconds since 1970).
    func markFailed(_ sequence: Int64, error: String, nextRetry: Double) throws {
        try database.run("""
            UPDATE upload_queue SET attempts = attempts + 1, next_retry = ?, last_error = ?, running = 0 WHERE seq = ?
            """, [.real(nextRetry), .text(error), .integer(sequence)])
    }

    /// Count, oldest age, next retry, last error and the waiting changes.
    func status(now: Double = Date().timeIntervalSince1970) throws -> UploadQueueStatus {
        let all = try entries()
        return UploadQueueStatus(
            count: all.count, oldestAge: all.first.map { max(0, now - $0.created) },
            nextRetry: all.first?.nextRetry, lastError: all.compactMap(\.lastError).last,
            entries: all.map { entry in
                let change = entry.change
                let other = change.kind == .exchanged ? change.otherPath.map { [$0] } ?? [] : []
                return ([change.kind.rawValue, change.path] + other).joined(separator: " ")
            })
    }

    private static let columns = "seq, kind, path, other_path, item, base_version, replaced_size, created, attempts, next_retry, last_error"

    private static func optional(_ text: String?) -> SQLiteValue { text.map { .text($0) } ?? .null }

    private static func real(_ row: SQLiteRow, _ index: Int) -> Double? {
        switch row[index] {
        case .real(let value): return value
        case .integer(let value): return Double(value)
        default: return nil
        }
    }

    private static func entry(_ row: SQLiteRow) -> QueuedEntry? {
        guard let seq = row.int64(0), let kindText = row.string(1), let kind = QueuedChange.Kind(rawValue: kindText),
              let path = row.string(2), let created = real(row, 7) else { return nil }
        let change = QueuedChange(kind: kind, path: path, otherPath: row.string(3), item: row.string(4).map { ItemIdentifier($0) },
                                  baseVersion: row.string(5), replacedSize: row.int64(6))
        return QueuedEntry(sequence: seq, change: change, created: created, attempts: Int(row.int64(8) ?? 0),
                           nextRetry: real(row, 9), lastError: row.string(10))
    }
}
