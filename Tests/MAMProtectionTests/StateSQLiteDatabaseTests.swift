import Foundation
import Testing
@testable import MAMProtection

/// A database in a unique temporary directory for one test, removed afterwards.
private func withStateSQLiteTestDB<T>(_ body: (SQLiteDatabase, URL) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("mamfs-statesqlite-test-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let db = try SQLiteDatabase(path: dir.appendingPathComponent("t.db").path)
    defer { db.close() }
    return try body(db, dir)
}

private struct Abort: Error {}

@Suite struct StateSQLiteDatabaseTests {
    @Test func typedValuesRoundTrip() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(i INTEGER, s TEXT, b BLOB, n)")
            let blob = Data([0, 1, 2, 0, 255])
            try db.run("INSERT INTO t VALUES (?, ?, ?, ?)", [.integer(Int64.min), .text("zé\u{1F600}"), .blob(blob), .null])
            try db.run("INSERT INTO t VALUES (?, ?, ?, ?)", [SQLiteValue(Int64?.none), SQLiteValue(""), .blob(Data()), 42])
            let rows = try db.query("SELECT i, s, b, n FROM t ORDER BY rowid")
            #expect(rows.count == 2)
            #expect(rows[0].int64(0) == Int64.min)
            #expect(rows[0].string(1) == "zé\u{1F600}")
            #expect(rows[0].data(2) == blob)
            #expect(rows[0].isNull(3))
            #expect(rows[1].isNull(0))
            #expect(rows[1].string(1) == "")
            #expect(rows[1][2] == .blob(Data()), "an empty blob stays an empty blob, not NULL")
            #expect(rows[1].int64(3) == 42)
            #expect(rows[1].isNull(9))
        }
    }

    @Test func runReportsChangedRowsAndStatementsAreReusable() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")
            for k in 1...5 { try db.run("INSERT INTO t(k, v) VALUES (?, ?)", [.integer(Int64(k)), "v"]) }
            #expect(try db.run("UPDATE t SET v = ? WHERE k > ?", ["w", 2]) == 3)
            #expect(try db.lastInsertRowID() == 5)
            #expect(try db.queryFirst("SELECT count(*) FROM t WHERE v = ?", ["w"])?.int64(0) == 3)
            #expect(try db.queryFirst("SELECT v FROM t WHERE k = ?", [99]) == nil)
        }
    }

    @Test func wrongParameterCountIsAnError() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(k)")
            #expect(throws: MAMError.self) { try db.run("INSERT INTO t VALUES (?)", []) }
            #expect(throws: MAMError.self) { try db.run("INSERT INTO t VALUES (?)", [1, 2]) }
        }
    }

    @Test func transactionCommitsOrRollsBack() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY)")
            let value = try db.transaction { () throws -> Int in
                try db.run("INSERT INTO t VALUES (1)")
                return 7
            }
            #expect(value == 7)
            #expect(throws: Abort.self) {
                try db.transaction {
                    try db.run("INSERT INTO t VALUES (2)")
                    throw Abort()
                }
            }
            #expect(try db.query("SELECT k FROM t").compactMap { $0.int64(0) } == [1])
        }
    }

    @Test func nestedTransactionRollsBackOnlyItsOwnWork() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY)")
            try db.transaction {
                try db.run("INSERT INTO t VALUES (1)")
                #expect(throws: Abort.self) {
                    try db.transaction {
                        try db.run("INSERT INTO t VALUES (2)")
                        throw Abort()
                    }
                }
                try db.transaction { try db.run("INSERT INTO t VALUES (3)") }
            }
            #expect(try db.query("SELECT k FROM t ORDER BY k").compactMap { $0.int64(0) } == [1, 3])
        }
    }

    @Test func errorsCarrySQLiteMessagesButNeverBoundValues() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(k TEXT PRIMARY KEY)")
            let secret = "s3cr3t-key-material"
            try db.run("INSERT INTO t VALUES (?)", [.text(secret)])
            do {
                try db.run("INSERT INTO t VALUES (?)", [.text(secret)])
                Issue.record("duplicate primary key was accepted")
            } catch let error as MAMError {
                guard case .internalError(let message) = error else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(message.contains("UNIQUE constraint failed"))
                #expect(!message.contains(secret))
                #expect(!error.description.contains(secret))
            }
        }
    }

    @Test func fullDatabaseIsENOSPC() throws {
        try withStateSQLiteTestDB { db, _ in
            try db.execute("CREATE TABLE t(b BLOB)")
            // A page cap makes SQLite answer SQLITE_FULL exactly as a full disk does.
            let pages = try db.queryFirst("PRAGMA page_count")?.int64(0) ?? 0
            _ = try db.query("PRAGMA max_page_count = \(pages + 2)")
            #expect {
                for _ in 0..<10 { try db.run("INSERT INTO t VALUES (?)", [.blob(Data(repeating: 1, count: 8192))]) }
            } throws: { error in
                guard case MAMError.system(_, let code) = error else { return false }
                return code == ENOSPC
            }
        }
    }

    @Test func closedDatabaseThrowsInsteadOfCrashing() throws {
        try withStateSQLiteTestDB { db, _ in
            db.close()
            #expect(throws: MAMError.internalError("database is closed")) { try db.execute("SELECT 1") }
            #expect(!db.integrityCheck())
            db.close()
        }
    }

    @Test func nonDatabaseFileIsAnErrorNotACrash() throws {
        try withStateSQLiteTestDB { _, dir in
            let path = dir.appendingPathComponent("junk.db").path
            try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: path))
            #expect(throws: MAMError.self) { _ = try SQLiteDatabase(path: path, create: false) }
        }
    }
}
