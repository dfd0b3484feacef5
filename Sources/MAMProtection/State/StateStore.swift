import Foundation
import MAMSystem

/// The SQLite state database of a state directory: registered accounts and their policies,
/// wrapped account keys, known roots and a small key/value table.
///
/// Thread-safe; several `StateStore`s (in this or other processes, e.g. the CLI and a running
/// mount) may use the same file at once: writes wait for each other (busy timeout 10 s), and
/// `dataVersion()` tells a long-lived instance that another one has committed.
/// Key blobs are opaque bytes here: wrapping and unwrapping happen in the key store.
///
/// Schema version (PRAGMA user_version) 4 (version 2 added the audit log's tail, version 3 the
/// accounts' tenant, UPN-keyed object ID and registered flag, version 4 the last compliance
/// result per account). accountIds and UPNs are stored canonical
/// (lowercased, see `AccountIdentity.canonical`), so every lookup is case-insensitive.
///
/// Errors: SQLite failures are `MAMError.internalError`, a full disk is
/// `MAMError.system(_, errno: ENOSPC)`; per-method errors are listed on each method.
public final class StateStore: Sendable {
    /// The schema version this code writes and reads.
    public static let schemaVersion: Int64 = 4

    /// The state directory the database lives in.
    public let directory: StateDirectory
    /// The underlying connection (for other state tables of the library).
    let database: SQLiteDatabase

    /// Opens the state database of `directory`; see `init(directory:create:)`.
    public static func open(directory: StateDirectory, create: Bool) throws -> StateStore {
        try StateStore(directory: directory, create: create)
    }

    /// Opens the state database `DIR/state.db`, migrating its schema to `schemaVersion`.
    ///
    /// With `create` true, the directory is created (0700) and the database (0600) if missing.
    /// - Throws: `MAMError.fileNotFound("no mamfs state in DIR (run 'mamfs init')")` when
    ///   `create` is false and there is no database; `MAMError.cannotCreateOutput` when the
    ///   directory cannot be created; `MAMError.newerVersion` when the database was written by
    ///   a newer mamfs (higher schema version); `MAMError.damagedDatabase` when it is damaged,
    ///   not a SQLite database, or (unless `create`) has no mamfs schema.
    public init(directory: StateDirectory, create: Bool) throws {
        if create {
            try directory.create()
        } else if !directory.databaseExists {
            throw MAMError.fileNotFound("no mamfs state in \(directory.url.path) (run 'mamfs init')")
        }
        self.directory = directory
        if !create { try Self.requireSchema(directory.databaseURL.path) }
        self.database = try SQLiteDatabase(path: directory.databaseURL.path, create: create)
        try migrate(creating: create)
    }

    /// The error for a database at `path` that is not a state (no mamfs schema).
    private static func notAState(_ path: String) -> MAMError {
        .damagedDatabase("\(path) is not a mamfs state database (it has no mamfs schema): restore it from a backup, or make a new state with 'mamfs init'")
    }

    /// Refuses, before SQLite opens it (which would switch it to WAL mode, writing to it), a
    /// file that cannot be a state: an empty one, or a SQLite database whose header has no
    /// mamfs schema version (user_version 0, bytes 60-63) and no write-ahead log that could
    /// hold a newer one. Anything else is left to SQLite and `migrate`.
    private static func requireSchema(_ path: String) throws {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) else { return }
        var header = [UInt8](repeating: 0, count: 100)
        let fd = file.rawValue
        guard let count = try? header.withUnsafeMutableBytes({ try FileIO.preadFully(fd, $0, at: 0) }) else { return }
        let magic = Array("SQLite format 3".utf8) + [0]
        let noSchema = count == 0
            || (count == 100 && Array(header[0..<16]) == magic && header[60..<64].allSatisfy { $0 == 0 })
        var wal = stat()
        let walHolds = stat(path + "-wal", &wal) == 0 && wal.st_size > 0
        if noSchema && !walHolds {
            throw Self.notAState(path)
        }
    }

    /// Closes the connection; later calls throw `MAMError.internalError`.
    public func close() {
        database.close()
    }

    // MARK: - Database-wide

    /// `PRAGMA data_version` of this connection: changes whenever another connection or
    /// process commits. Poll it to notice changes made by the CLI.
    public func dataVersion() throws -> Int64 {
        try database.dataVersion()
    }

    /// The database's wal-index header as it is now (`SQLiteDatabase.commitMarker`: read from
    /// SQLite's own mapping, no system call): equal markers read at two moments mean no
    /// connection committed in between, so a poller that saw the first may skip
    /// `dataVersion()`. Nil when the header cannot tell; then only `dataVersion()` can.
    public func commitMarker() -> SQLiteCommitMarker? {
        database.commitMarker()
    }

    /// `PRAGMA integrity_check` == "ok"; false also when the check cannot run.
    public func integrityCheck() -> Bool {
        database.integrityCheck()
    }

    // MARK: - meta

    /// The value stored under `key` in the `meta` table, or nil.
    public func metaValue(_ key: String) throws -> Data? {
        try database.queryFirst("SELECT value FROM meta WHERE key = ?", [.text(key)])?.data(0)
    }

    /// Stores `value` under `key` in the `meta` table, replacing any previous value.
    /// Keys starting with `mamfs.` are reserved for the store itself.
    public func setMetaValue(_ value: Data, forKey key: String) throws {
        try database.run("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         [.text(key), .blob(value)])
    }

    /// Deletes `key` from the `meta` table.
    /// - Returns: true when a value was deleted.
    @discardableResult
    public func deleteMetaValue(_ key: String) throws -> Bool {
        try database.run("DELETE FROM meta WHERE key = ?", [.text(key)]) > 0
    }

    // MARK: - accounts

    /// Inserts the account or replaces its upn, managed flag, policy and wipedAt (its creation
    /// time is kept). accountId and UPN are stored canonical.
    /// - Returns: the record as stored (canonical).
    /// - Throws: `MAMError.invalidArguments` when accountId is not a GUID, the UPN is not
    ///   `name@domain`, or the UPN already belongs to another account.
    @discardableResult
    public func upsertAccount(_ record: AccountRecord) throws -> AccountRecord {
        let keyedByUPN = AccountIdentity.isUPN(record.accountId) && record.upn.map(AccountIdentity.canonical) == AccountIdentity.canonical(record.accountId)
        guard AccountIdentity.isAccountId(record.accountId) || keyedByUPN else {
            throw MAMError.invalidArguments("'\(InputQuote.short(record.accountId))' is not an accountId (expected a GUID)")
        }
        if let upn = record.upn, !AccountIdentity.isUPN(upn) {
            throw MAMError.invalidArguments("'\(InputQuote.short(upn))' is not a UPN (expected name@domain)")
        }
        for guid in [record.tenantId, record.objectId].compactMap({ $0 }) where !AccountIdentity.isAccountId(guid) {
            throw MAMError.invalidArguments("'\(InputQuote.short(guid))' is not a GUID")
        }
        var stored = record
        stored.accountId = AccountIdentity.canonical(record.accountId)
        stored.upn = record.upn.map(AccountIdentity.canonical)
        stored.tenantId = record.tenantId.map(AccountIdentity.canonical)
        stored.objectId = keyedByUPN ? record.objectId.map(AccountIdentity.canonical) : nil
        try database.transaction {
            if let upn = stored.upn,
               let other = try database.queryFirst("SELECT account_id FROM accounts WHERE upn = ? AND account_id <> ?",
                                                   [.text(upn), .text(stored.accountId)])?.string(0) {
                throw MAMError.invalidArguments("UPN \(upn) is already registered to account \(other)")
            }
            if let objectId = stored.objectId,
               let other = try database.queryFirst("SELECT account_id FROM accounts WHERE (account_id = ?1 OR object_id = ?1) AND account_id <> ?2",
                                                   [.text(objectId), .text(stored.accountId)])?.string(0) {
                throw MAMError.invalidArguments("accountId \(objectId) is already registered as account \(other)")
            }
            try database.run("""
                INSERT INTO accounts(account_id, upn, managed, policy_json, created_at, wiped_at, tenant_id, object_id, registered)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(account_id) DO UPDATE SET
                    upn = excluded.upn, managed = excluded.managed,
                    policy_json = excluded.policy_json, wiped_at = excluded.wiped_at,
                    tenant_id = excluded.tenant_id, object_id = excluded.object_id, registered = excluded.registered
                """,
                [.text(stored.accountId), SQLiteValue(stored.upn), SQLiteValue(stored.managed),
                 SQLiteValue(stored.policyJSON), .integer(Self.now()), SQLiteValue(stored.wipedAt),
                 SQLiteValue(stored.tenantId), SQLiteValue(stored.objectId), SQLiteValue(stored.registered)])
        }
        return stored
    }

    /// The account named by `name` (see `AccountIdentity.parseName`): its accountId, UPN, the
    /// accountId learned for a UPN-keyed account, or a homeAccountId `OID.TID`, compared
    /// case-insensitively; nil if none.
    /// - Throws: `MAMError.invalidArguments` for a malformed homeAccountId;
    ///   `MAMError.unknownAccount` when a homeAccountId's tenant differs from the tenant recorded for its OID.
    public func account(named name: String) throws -> AccountRecord? {
        let parsed = try AccountIdentity.parseName(name)
        guard !parsed.key.isEmpty else { return nil }
        guard let record = try database.queryFirst("\(Self.accountColumns) WHERE account_id = ?1 OR upn = ?1 OR object_id = ?1",
                                                   [.text(parsed.key)]).map(Self.accountRecord) else { return nil }
        if let tenant = parsed.tenantId, let known = record.tenantId, tenant != known {
            throw MAMError.unknownAccount("'\(InputQuote.short(name))' names tenant \(tenant), but account \(parsed.key) is registered in tenant \(known)")
        }
        return record
    }

    /// Every registered account, sorted by accountId.
    public func allAccounts() throws -> [AccountRecord] {
        try database.query("\(Self.accountColumns) ORDER BY account_id").map(Self.accountRecord)
    }

    /// The accounts that are managed (enrolled), sorted by accountId.
    public func managedAccounts() throws -> [AccountRecord] {
        try database.query("\(Self.accountColumns) WHERE managed = 1 ORDER BY account_id").map(Self.accountRecord)
    }

    /// Sets whether the account is registered.
    /// - Throws: `MAMError.unknownAccount` when no account has this accountId.
    public func setRegistered(_ accountId: String, registered: Bool) throws {
        try updateAccount(accountId, "UPDATE accounts SET registered = ? WHERE account_id = ?", [SQLiteValue(registered)])
    }

    /// Sets whether the account is managed.
    /// - Throws: `MAMError.unknownAccount` when no account has this accountId.
    public func setManaged(_ accountId: String, managed: Bool) throws {
        try updateAccount(accountId, "UPDATE accounts SET managed = ? WHERE account_id = ?", [SQLiteValue(managed)])
    }

    /// Replaces the account's policy document (nil removes it).
    /// - Throws: `MAMError.unknownAccount` when no account has this accountId.
    public func setPolicy(_ accountId: String, json: String?) throws {
        try updateAccount(accountId, "UPDATE accounts SET policy_json = ? WHERE account_id = ?", [SQLiteValue(json)])
    }

    /// Records a selective wipe of the account at `time` (Unix seconds, default now). Only the
    /// timestamp changes: keys and managed flag are the caller's to change.
    /// - Throws: `MAMError.unknownAccount` when no account has this accountId.
    public func markWiped(_ accountId: String, at time: Int64? = nil) throws {
        try updateAccount(accountId, "UPDATE accounts SET wiped_at = ? WHERE account_id = ?", [.integer(time ?? Self.now())])
    }

    /// Deletes the account and all of its keys (crypto-shredding, as `deleteAccountKeys`).
    /// Its key-id counter is kept, so a re-registered account never reuses a key id; known
    /// roots naming the account are kept (a later wipe may still need to walk them).
    /// - Returns: true when the account existed.
    @discardableResult
    public func deleteAccount(_ accountId: String) throws -> Bool {
        let id = AccountIdentity.canonical(accountId)
        let (existed, keys) = try database.transaction { () throws -> (Bool, Int) in
            let keys = try deleteKeysLocked(id)
            let existed = try database.run("DELETE FROM accounts WHERE account_id = ?", [.text(id)]) > 0
            return (existed, keys)
        }
        if keys > 0 { try database.checkpointTruncate() }
        return existed
    }

    // MARK: - account keys

    /// Stores a wrapped account key under (accountId, keyId).
    /// - Parameter wrapped: the key as wrapped by the key store (opaque bytes).
    /// - Throws: `MAMError.unknownAccount` when the account is not registered;
    ///   `MAMError.invalidArguments` when keyId is below `nextAccountKeyId(accountId)`
    ///   (key ids are never reused, even after the keys were deleted).
    public func insertAccountKey(_ accountId: String, keyId: UInt32, wrapped: Data) throws {
        let id = AccountIdentity.canonical(accountId)
        try database.transaction {
            try insertKeyLocked(id, keyId: keyId, wrapped: wrapped)
        }
    }

    /// Allocates the next key id of the account, calls `wrap(keyId)` to produce the wrapped key
    /// (so the key id can be bound into the wrapping's AAD) and stores it, all in one
    /// transaction, so concurrent callers never get the same id. `wrap` runs with the database
    /// locked: it must not use this store.
    /// - Returns: the key id used.
    /// - Throws: as `insertAccountKey`, or what `wrap` throws (nothing is stored then).
    @discardableResult
    public func addAccountKey(_ accountId: String, wrap: (UInt32) throws -> Data) throws -> UInt32 {
        let id = AccountIdentity.canonical(accountId)
        return try database.transaction {
            let keyId = try nextKeyIdLocked(id)
            try insertKeyLocked(id, keyId: keyId, wrapped: try wrap(keyId))
            return keyId
        }
    }

    /// The wrapped key stored under (accountId, keyId), or nil (never issued, or deleted).
    public func accountKey(_ accountId: String, keyId: UInt32) throws -> Data? {
        try database.queryFirst("SELECT wrapped_key FROM account_keys WHERE account_id = ? AND key_id = ?",
                                [.text(AccountIdentity.canonical(accountId)), .integer(Int64(keyId))])?.data(0)
    }

    /// The highest key id the account currently has a key for, or nil when it has none.
    public func latestAccountKeyId(_ accountId: String) throws -> UInt32? {
        let row = try database.queryFirst("SELECT MAX(key_id) FROM account_keys WHERE account_id = ?",
                                          [.text(AccountIdentity.canonical(accountId))])
        return row?.int64(0).flatMap { UInt32(exactly: $0) }
    }

    /// The key ids the account currently has keys for, ascending.
    public func accountKeyIds(_ accountId: String) throws -> [UInt32] {
        try database.query("SELECT key_id FROM account_keys WHERE account_id = ? ORDER BY key_id",
                           [.text(AccountIdentity.canonical(accountId))]).compactMap { $0.int64(0).flatMap { UInt32(exactly: $0) } }
    }

    /// How many account keys each account has (canonical accountId -> count); the key bytes
    /// are never read.
    public func accountKeyCounts() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try database.query("SELECT account_id, COUNT(*) FROM account_keys GROUP BY account_id") {
            if let id = row.string(0), let count = row.int64(1) { counts[id] = Int(count) }
        }
        return counts
    }

    /// One more than the highest key id ever issued to the account (1 for a new account),
    /// counting keys that were since deleted.
    /// - Throws: `MAMError.internalError` when all 2^32-1 ids are used.
    public func nextAccountKeyId(_ accountId: String) throws -> UInt32 {
        let id = AccountIdentity.canonical(accountId)
        return try database.transaction { try nextKeyIdLocked(id) }
    }

    /// Deletes every key of the account (crypto-shredding: files wrapped under them become
    /// unreadable everywhere). `secure_delete` zeroes the freed bytes and the WAL is then
    /// checkpointed and truncated, so the old key bytes stay neither in the database nor in
    /// its WAL; both files are then searched for the deleted bytes. The key-id counter is kept.
    /// - Returns: the number of keys deleted.
    /// - Throws: `.system(errno: EBUSY)` when the keys are deleted but their bytes may remain
    ///   because another connection holds a read transaction (see `requireKeyBytesGone`).
    @discardableResult
    public func deleteAccountKeys(_ accountId: String) throws -> Int {
        let (count, wrapped) = try deleteAccountKeysReturningBlobs(accountId)
        try requireKeyBytesGone(wrapped)
        return count
    }

    // MARK: - known roots

    /// Records `path` (made absolute and standardized) as a root of `kind`, optionally
    /// belonging to `accountId`; an existing entry gets the new kind and account.
    /// - Throws: `MAMError.invalidArguments` when `path` is empty.
    public func addKnownRoot(_ path: String, kind: KnownRoot.Kind, accountId: String? = nil) throws {
        guard !path.isEmpty else { throw MAMError.invalidArguments("empty root path") }
        try database.run("""
            INSERT INTO known_roots(path, kind, account_id, added_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET kind = excluded.kind, account_id = excluded.account_id
            """,
            [.text(Self.standardPath(path)), .text(kind.rawValue),
             SQLiteValue(accountId.map(AccountIdentity.canonical)), .integer(Self.now())])
    }

    /// Every known root, sorted by path.
    /// - Throws: `MAMError.damagedDatabase` when a row holds an unknown kind.
    public func knownRoots() throws -> [KnownRoot] {
        try database.query("SELECT path, kind, account_id, added_at FROM known_roots ORDER BY path").map { row in
            guard let path = row.string(0), let kindText = row.string(1), let kind = KnownRoot.Kind(rawValue: kindText) else {
                throw MAMError.damagedDatabase("malformed row in known_roots (restore the state from a backup)")
            }
            return KnownRoot(path: path, kind: kind, accountId: row.string(2), addedAt: row.int64(3))
        }
    }

    /// Forgets the root at `path` (standardized as in `addKnownRoot`).
    /// - Returns: true when it was known.
    @discardableResult
    public func removeKnownRoot(_ path: String) throws -> Bool {
        try database.run("DELETE FROM known_roots WHERE path = ?", [.text(Self.standardPath(path))]) > 0
    }

    // MARK: - Private

    private static let accountColumns = "SELECT account_id, upn, managed, policy_json, wiped_at, tenant_id, object_id, registered FROM accounts"

    private static let schemaV1 = """
        CREATE TABLE IF NOT EXISTS meta(
            key TEXT PRIMARY KEY,
            value BLOB NOT NULL);
        CREATE TABLE IF NOT EXISTS accounts(
            account_id TEXT PRIMARY KEY,
            upn TEXT UNIQUE,
            managed INTEGER NOT NULL,
            policy_json TEXT,
            created_at INTEGER,
            wiped_at INTEGER);
        CREATE TABLE IF NOT EXISTS account_keys(
            account_id TEXT NOT NULL,
            key_id INTEGER NOT NULL,
            wrapped_key BLOB NOT NULL,
            created_at INTEGER,
            PRIMARY KEY(account_id, key_id));
        CREATE TABLE IF NOT EXISTS known_roots(
            path TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK(kind IN ('backing','protected','root')),
            account_id TEXT,
            added_at INTEGER);
        """

    /// Version 2: the last record of the audit log (`StateStore+AuditTail`), one row.
    private static let schemaV2 = """
        CREATE TABLE IF NOT EXISTS audit_tail(
            id INTEGER PRIMARY KEY CHECK(id = 1),
            seq INTEGER NOT NULL,
            hash TEXT NOT NULL);
        """

    /// Version 3: the tenant of a homeAccountId, the accountId learned for an account enrolled
    /// by UPN alone, and whether the account is registered.
    /// Column name -> definition; a column already there is not added again.
    private static let schemaV3: [(String, String)] = [
        ("tenant_id", "TEXT"),
        ("object_id", "TEXT"),
        ("registered", "INTEGER NOT NULL DEFAULT 1"),
    ]

    /// Brings the schema up to `schemaVersion`. Only `creating` (init) lays out a database
    /// with no mamfs schema at all: any other opener would write mamfs' tables into a file that
    /// is not a state (an empty file, another program's database).
    private func migrate(creating: Bool) throws {
        if try userVersion() == Self.schemaVersion { return }
        try database.transaction {
            // Re-read under the write lock: another process may have migrated meanwhile.
            let version = try userVersion()
            if version < 1 && !creating {
                throw Self.notAState(directory.databaseURL.path)
            }
            if version > Self.schemaVersion {
                throw MAMError.newerVersion("state database \(directory.databaseURL.path) has schema version \(version); this mamfs reads up to \(Self.schemaVersion) (use the mamfs that wrote it)")
            }
            if version < 1 {
                try database.execute(Self.schemaV1)
                try database.execute("PRAGMA user_version = 1")
            }
            if version < 2 {
                try database.execute(Self.schemaV2)
                try database.execute("PRAGMA user_version = 2")
            }
            if version < 3 {
                let present = Set(try database.query("PRAGMA table_info(accounts)").compactMap { $0.string(1) })
                for (column, definition) in Self.schemaV3 where !present.contains(column) {
                    try database.execute("ALTER TABLE accounts ADD COLUMN \(column) \(definition)")
                }
                try database.execute("PRAGMA user_version = 3")
            }
            if version < 4 {
                try database.execute(Self.schemaV4)
                try database.execute("PRAGMA user_version = 4")
            }
        }
    }

    private func userVersion() throws -> Int64 {
        guard let version = try database.queryFirst("PRAGMA user_version")?.int64(0) else {
            throw MAMError.internalError("PRAGMA user_version returned no value")
        }
        return version
    }

    private static func accountRecord(_ row: SQLiteRow) throws -> AccountRecord {
        guard let accountId = row.string(0), let managed = row.int64(2) else {
            throw MAMError.damagedDatabase("malformed row in accounts (restore the state from a backup)")
        }
        return AccountRecord(accountId: accountId, upn: row.string(1), managed: managed != 0,
                             policyJSON: row.string(3), wipedAt: row.int64(4), tenantId: row.string(5),
                             objectId: row.string(6), registered: (row.int64(7) ?? 1) != 0)
    }

    private func updateAccount(_ accountId: String, _ sql: String, _ values: [SQLiteValue]) throws {
        let id = AccountIdentity.canonical(accountId)
        guard try database.run(sql, values + [.text(id)]) > 0 else {
            throw MAMError.unknownAccount(id)
        }
    }

    private static func keyCounterName(_ accountId: String) -> String {
        "mamfs.key_counter.\(accountId)"
    }

    /// Highest key id ever issued: the counter in meta, or the highest stored id if larger.
    /// Call inside a transaction.
    private func highestIssuedKeyIdLocked(_ accountId: String) throws -> UInt32 {
        var highest: UInt32 = 0
        if let data = try metaValue(Self.keyCounterName(accountId)) {
            guard let value = UInt32(String(decoding: data, as: UTF8.self)) else {
                throw MAMError.damagedDatabase("malformed key counter for account \(accountId) (restore the state from a backup)")
            }
            highest = value
        }
        if let stored = try latestAccountKeyId(accountId) { highest = max(highest, stored) }
        return highest
    }

    private func nextKeyIdLocked(_ accountId: String) throws -> UInt32 {
        let highest = try highestIssuedKeyIdLocked(accountId)
        guard highest < UInt32.max else {
            throw MAMError.internalError("account \(accountId) has used every key id")
        }
        return highest + 1
    }

    private func insertKeyLocked(_ accountId: String, keyId: UInt32, wrapped: Data) throws {
        guard try database.queryFirst("SELECT 1 FROM accounts WHERE account_id = ?", [.text(accountId)]) != nil else {
            throw MAMError.unknownAccount(accountId)
        }
        let next = try nextKeyIdLocked(accountId)
        guard keyId >= next else {
            throw MAMError.invalidArguments("key id \(keyId) was already issued for account \(accountId) (next is \(next))")
        }
        try database.run("INSERT INTO account_keys(account_id, key_id, wrapped_key, created_at) VALUES (?, ?, ?, ?)",
                         [.text(accountId), .integer(Int64(keyId)), .blob(wrapped), .integer(Self.now())])
        try setMetaValue(Data(String(keyId).utf8), forKey: Self.keyCounterName(accountId))
    }

    func deleteKeysLockedForScrub(_ accountId: String) throws -> Int { try deleteKeysLocked(accountId) }

    private func deleteKeysLocked(_ accountId: String) throws -> Int {
        let highest = try highestIssuedKeyIdLocked(accountId)
        if highest > 0 {
            try setMetaValue(Data(String(highest).utf8), forKey: Self.keyCounterName(accountId))
        }
        return try database.run("DELETE FROM account_keys WHERE account_id = ?", [.text(accountId)])
    }

    private static func standardPath(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }

    private static func now() -> Int64 {
        Int64(Date().timeIntervalSince1970)
    }
}
