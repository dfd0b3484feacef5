import CSQLite
import Foundation
import MAMSystem

/// One SQLite connection shared by many threads, every use serialized by a lock.
///
/// Opened in WAL mode with `synchronous=NORMAL`, `busy_timeout=10000` (ms), `foreign_keys=ON`
/// and `secure_delete=ON` (freed pages are zeroed, so deleted key material does not linger in
/// the file). Prepared statements are cached by SQL text. Values are always bound, never
/// spliced into SQL, so error messages (which carry `sqlite3_errmsg`) never contain them.
///
/// The lock is recursive: inside `transaction { }` the same thread may call any method of the
/// same database and takes part in the transaction, while other threads wait until it ends.
/// A transaction body must not wait for another thread that uses this database.
///
/// Errors: `MAMError.system(msg, errno: ENOSPC)` when the disk is full (SQLITE_FULL),
/// `MAMError.system(msg, errno:)` for I/O and open failures that carry an errno,
/// `MAMError.damagedDatabase(msg)` for a damaged file or one that is not a database
/// (SQLITE_CORRUPT, SQLITE_NOTADB), `MAMError.internalError(msg)` for every other SQLite failure.
public final class SQLiteDatabase: @unchecked Sendable {
    /// The database file path.
    public let path: String

    private let lock = NSRecursiveLock()
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    private var savepointDepth = 0
    /// Whether the connection is in WAL mode (set at open; nothing changes it after).
    private var inWALMode = false
    /// Region 0 of SQLite's own mapping of the wal-index, once looked up (`commitMarker`).
    private var walIndex: WALIndexLookup = .notTried

    private enum WALIndexLookup {
        case notTried, unavailable
        case mapped(UnsafeRawPointer)
    }

    /// Opens (and, when `create` is true, creates) the database at `path`.
    ///
    /// A file created here gets mode `fileMode` (default 0600) regardless of the umask; SQLite
    /// gives its `-wal` and `-shm` files the same mode.
    /// - Throws: `MAMError.system` when the file cannot be created or opened (errno from the OS),
    ///   `MAMError.damagedDatabase` when it is damaged or not a SQLite database.
    public init(path: String, create: Bool = true, fileMode: mode_t = 0o600) throws {
        self.path = path
        if create { try Self.createFile(path, mode: fileMode) }
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let failure = Self.makeError(rc, db: db, context: "cannot open database \(path)")
            sqlite3_close_v2(db)
            throw failure
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 10_000)
        do {
            inWALMode = try queryFirst("PRAGMA journal_mode=WAL")?.string(0)?.lowercased() == "wal"
            try execute("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON;")
        } catch {
            close()
            throw error
        }
    }

    deinit {
        closeLocked()
    }

    /// Finalizes cached statements and closes the connection. Later calls throw
    /// `MAMError.internalError("database is closed")`. Calling it twice is harmless.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        closeLocked()
    }

    /// Runs one or more SQL statements separated by `;`, with no parameters and no result rows.
    /// - Throws: see the type's documentation.
    public func execute(_ sql: String) throws {
        try locked { db in
            let rc = sqlite3_exec(db, sql, nil, nil, nil)
            guard rc == SQLITE_OK else { throw Self.makeError(rc, db: db, context: "SQL failed") }
        }
    }

    /// Runs one statement with `arguments` bound to its `?` parameters in order, discarding rows.
    /// - Returns: the number of rows inserted, updated or deleted (`sqlite3_changes`).
    /// - Throws: see the type's documentation.
    @discardableResult
    public func run(_ sql: String, _ arguments: [SQLiteValue] = []) throws -> Int {
        try withStatement(sql, arguments) { db, statement in
            while true {
                let rc = sqlite3_step(statement)
                if rc == SQLITE_DONE { break }
                if rc != SQLITE_ROW { throw Self.makeError(rc, db: db, context: "SQL step failed") }
            }
            return Int(sqlite3_changes(db))
        }
    }

    /// Runs one statement with `arguments` bound to its `?` parameters and returns every row.
    /// - Throws: see the type's documentation.
    public func query(_ sql: String, _ arguments: [SQLiteValue] = []) throws -> [SQLiteRow] {
        try withStatement(sql, arguments) { db, statement in
            var rows: [SQLiteRow] = []
            while true {
                let rc = sqlite3_step(statement)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { throw Self.makeError(rc, db: db, context: "SQL step failed") }
                rows.append(Self.readRow(statement))
            }
            return rows
        }
    }

    /// The first row of `query(sql, arguments)`, or nil when there is none.
    public func queryFirst(_ sql: String, _ arguments: [SQLiteValue] = []) throws -> SQLiteRow? {
        try query(sql, arguments).first
    }

    /// The rowid of the last row inserted through this connection.
    public func lastInsertRowID() throws -> Int64 {
        try locked { db in sqlite3_last_insert_rowid(db) }
    }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` (the write lock is taken up front, so a
    /// concurrent writer waits in the busy handler instead of failing later), then `COMMIT`;
    /// `ROLLBACK` when `body` or the commit throws. Nested calls on the same thread use a
    /// SAVEPOINT, rolled back on its own when its body throws.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws, or a SQLite error (see the type's documentation).
    @discardableResult
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let db = handle else { throw MAMError.internalError("database is closed") }
        if sqlite3_get_autocommit(db) == 0 {
            savepointDepth += 1
            defer { savepointDepth -= 1 }
            let name = "mamfs_savepoint_\(savepointDepth)"
            try execute("SAVEPOINT \(name)")
            do {
                let result = try body()
                try execute("RELEASE \(name)")
                return result
            } catch {
                _ = try? execute("ROLLBACK TO \(name)")
                _ = try? execute("RELEASE \(name)")
                throw error
            }
        }
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if sqlite3_get_autocommit(db) == 0 { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// `PRAGMA integrity_check`: true only when SQLite answers exactly "ok". False also when
    /// the check cannot run at all (the file is not a database, I/O error).
    public func integrityCheck() -> Bool {
        guard let rows = try? query("PRAGMA integrity_check") else { return false }
        return rows.count == 1 && rows[0].string(0) == "ok"
    }

    /// `PRAGMA data_version`: a number that changes when ANOTHER connection (this process or
    /// another) commits to the database; this connection's own commits leave it unchanged.
    /// Cheap enough to poll, which is how a running mount notices CLI changes.
    /// - Throws: see the type's documentation.
    public func dataVersion() throws -> Int64 {
        guard let version = try queryFirst("PRAGMA data_version")?.int64(0) else {
            throw MAMError.internalError("PRAGMA data_version returned no value")
        }
        return version
    }

    /// The wal-index header as it is now, read from SQLite's own mapping of the `-shm` file (no
    /// system call, no transaction; see `SQLiteCommitMarker`): equal markers at two moments
    /// mean no connection committed in between. Nil when the connection is not in WAL mode,
    /// has not read the database yet, is closed, or the header is not a trusted one; then only
    /// `dataVersion()` can tell.
    public func commitMarker() -> SQLiteCommitMarker? {
        lock.lock()
        defer { lock.unlock() }
        if case .notTried = walIndex, let db = handle, inWALMode {
            // A read in WAL mode first, so the connection has mapped the wal-index.
            let read = (try? dataVersion()) != nil
            walIndex = read ? SQLiteCommitMarker.walIndex(of: db).map { .mapped($0) } ?? .unavailable : .unavailable
        }
        guard case .mapped(let index) = walIndex else { return nil }
        return SQLiteCommitMarker(walIndex: index)
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)`: copies the WAL into the database file and truncates
    /// the WAL to zero bytes, so old page images (e.g. deleted keys) do not stay in it.
    /// Waits for readers through the busy handler.
    /// - Returns: true when the checkpoint completed, false when readers kept it from finishing.
    /// - Throws: see the type's documentation; also when called inside a transaction.
    @discardableResult
    public func checkpointTruncate() throws -> Bool {
        guard let row = try queryFirst("PRAGMA wal_checkpoint(TRUNCATE)") else {
            throw MAMError.internalError("PRAGMA wal_checkpoint returned no value")
        }
        return row.int64(0) == 0
    }

    // MARK: - Private

    private func locked<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let db = handle else { throw MAMError.internalError("database is closed") }
        return try body(db)
    }

    private func withStatement<T>(_ sql: String, _ arguments: [SQLiteValue],
                                  _ body: (OpaquePointer, OpaquePointer) throws -> T) throws -> T {
        try locked { db in
            let statement = try prepared(sql, db: db)
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            let expected = Int(sqlite3_bind_parameter_count(statement))
            guard expected == arguments.count else {
                throw MAMError.internalError("SQL expects \(expected) parameters, \(arguments.count) given: \(sql)")
            }
            for (offset, value) in arguments.enumerated() {
                try bind(value, at: Int32(offset + 1), statement: statement, db: db)
            }
            return try body(db, statement)
        }
    }

    private func prepared(_ sql: String, db: OpaquePointer) throws -> OpaquePointer {
        if let cached = statements[sql] { return cached }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw Self.makeError(rc, db: db, context: "cannot prepare SQL (\(sql))")
        }
        statements[sql] = statement
        return statement
    }

    private func bind(_ value: SQLiteValue, at index: Int32, statement: OpaquePointer, db: OpaquePointer) throws {
        let rc: Int32
        switch value {
        case .integer(let v):
            rc = sqlite3_bind_int64(statement, index, v)
        case .real(let v):
            rc = sqlite3_bind_double(statement, index, v)
        case .text(let v):
            rc = mamfs_sqlite3_bind_text_transient(statement, index, v)
        case .blob(let v):
            guard v.count <= Int(Int32.max) else {
                throw MAMError.invalidArguments("blob of \(v.count) bytes is too large for SQLite")
            }
            rc = v.withUnsafeBytes { buffer -> Int32 in
                // A NULL pointer would bind SQL NULL; an empty blob must stay an empty blob.
                guard let base = buffer.baseAddress, buffer.count > 0 else {
                    return sqlite3_bind_zeroblob(statement, index, 0)
                }
                return mamfs_sqlite3_bind_blob_transient(statement, index, base, Int32(buffer.count))
            }
        case .null:
            rc = sqlite3_bind_null(statement, index)
        }
        guard rc == SQLITE_OK else { throw Self.makeError(rc, db: db, context: "cannot bind parameter \(index)") }
    }

    private static func readRow(_ statement: OpaquePointer) -> SQLiteRow {
        let columns = sqlite3_column_count(statement)
        var values: [SQLiteValue] = []
        values.reserveCapacity(Int(columns))
        for column in 0..<columns {
            switch sqlite3_column_type(statement, column) {
            case SQLITE_INTEGER:
                values.append(.integer(sqlite3_column_int64(statement, column)))
            case SQLITE_FLOAT:
                values.append(.real(sqlite3_column_double(statement, column)))
            case SQLITE_TEXT:
                let count = Int(sqlite3_column_bytes(statement, column))
                if let text = sqlite3_column_text(statement, column) {
                    values.append(.text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)))
                } else {
                    values.append(.text(""))
                }
            case SQLITE_BLOB:
                let count = Int(sqlite3_column_bytes(statement, column))
                if let bytes = sqlite3_column_blob(statement, column), count > 0 {
                    values.append(.blob(Data(bytes: bytes, count: count)))
                } else {
                    values.append(.blob(Data()))
                }
            default:
                values.append(.null)
            }
        }
        return SQLiteRow(values: values)
    }

    private func closeLocked() {
        walIndex = .unavailable
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db = handle {
            sqlite3_close_v2(db)
            handle = nil
        }
    }

    private static func createFile(_ path: String, mode: mode_t) throws {
        let created: FileDescriptor
        do {
            created = try FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode: mode)
        } catch {
            if error == .fileExists { return }
            throw MAMError.system("cannot create database \(path)", errno: error.rawValue)
        }
        let fd = created.rawValue
        // The umask may have removed bits we want (or callers may ask for more than it allows).
        guard fchmod(fd, mode) == 0 else {
            throw MAMError.fromErrno("cannot set the mode of database \(path)")
        }
    }

    /// Maps a SQLite result code to a `MAMError`; the text comes from `sqlite3_errmsg`.
    private static func makeError(_ rc: Int32, db: OpaquePointer?, context: String) -> MAMError {
        let message: String
        if let db, let text = sqlite3_errmsg(db) {
            message = String(cString: text)
        } else if let text = sqlite3_errstr(rc) {
            message = String(cString: text)
        } else {
            message = "SQLite error \(rc)"
        }
        let full = "\(context): \(message)"
        switch rc & 0xff {
        case SQLITE_FULL:
            return .system(full, errno: ENOSPC)
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return .damagedDatabase(full + " (restore it from a backup)")
        case SQLITE_IOERR, SQLITE_CANTOPEN:
            let code = db.map { sqlite3_system_errno($0) } ?? 0
            return code != 0 ? .system(full, errno: code) : .internalError(full)
        default:
            return .internalError(full)
        }
    }
}
