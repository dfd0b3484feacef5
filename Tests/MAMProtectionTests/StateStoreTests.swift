import Foundation
import Testing
@testable import MAMProtection

/// A unique temporary directory for one test, removed afterwards.
private func withStateStoreTestDir<T>(_ body: (URL) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("mamfs-statestore-test-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    return try body(dir)
}

private func permissionBits(_ path: String) -> mode_t? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o7777
}

private func isError(_ error: any Error, _ check: (MAMError) -> Bool) -> Bool {
    guard let error = error as? MAMError else { return false }
    return check(error)
}

private let aliceId = "8C7F3E1A-0000-4000-8000-000000000001"
private let bobId = "8c7f3e1a-0000-4000-8000-000000000002"
private let carolId = "8c7f3e1a-0000-4000-8000-000000000003"

/// Collects failures from worker threads.
private final class FailureLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []
    func add(_ entry: String) { lock.withLock { entries.append(entry) } }
    var all: [String] { lock.withLock { entries } }
}

@Suite struct StateStoreTests {
    // MARK: opening

    @Test func schemaIsCreatedAndSurvivesReopen() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp.appendingPathComponent("state"))
            let store = try StateStore.open(directory: dir, create: true)
            #expect(try store.database.queryFirst("PRAGMA user_version")?.int64(0) == StateStore.schemaVersion)
            let tables = try store.database.query("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
                .compactMap { $0.string(0) }
            #expect(tables == ["account_keys", "accounts", "audit_tail", "compliance_results", "known_roots", "meta"])
            #expect(try store.database.queryFirst("PRAGMA journal_mode")?.string(0) == "wal")
            #expect(try store.database.queryFirst("PRAGMA foreign_keys")?.int64(0) == 1)
            #expect(try store.database.queryFirst("PRAGMA secure_delete")?.int64(0) == 1)
            #expect(try store.database.queryFirst("PRAGMA busy_timeout")?.int64(0) == 10_000)
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            store.close()

            let reopened = try StateStore.open(directory: dir, create: false)
            #expect(try reopened.account(named: aliceId)?.upn == "alice@contoso.com")
            #expect(try reopened.database.queryFirst("PRAGMA user_version")?.int64(0) == StateStore.schemaVersion)
        }
    }

    @Test("a version 2 state is migrated: its accounts gain tenant, object ID and registered (true)")
    func versionTwoStateGainsAccountColumns() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp.appendingPathComponent("state"))
            let store = try StateStore.open(directory: dir, create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            try store.database.execute("""
                ALTER TABLE accounts DROP COLUMN tenant_id; ALTER TABLE accounts DROP COLUMN object_id;
                ALTER TABLE accounts DROP COLUMN registered; PRAGMA user_version = 2
                """)
            store.close()

            let reopened = try StateStore.open(directory: dir, create: false)
            #expect(try reopened.database.queryFirst("PRAGMA user_version")?.int64(0) == StateStore.schemaVersion)
            let record = try reopened.account(named: aliceId)
            #expect(record?.upn == "alice@contoso.com")
            #expect(record?.registered == true)
            #expect(record?.tenantId == nil)
            try reopened.setRegistered(aliceId, registered: false)
            #expect(try reopened.account(named: "Alice@Contoso.com")?.registered == false)
        }
    }

    @Test("a version 1 state is migrated: it gains the audit tail and keeps its accounts")
    func versionOneStateGainsAuditTail() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp.appendingPathComponent("state"))
            let store = try StateStore.open(directory: dir, create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            try store.database.execute("DROP TABLE audit_tail; PRAGMA user_version = 1")
            store.close()

            let reopened = try StateStore.open(directory: dir, create: false)
            #expect(try reopened.database.queryFirst("PRAGMA user_version")?.int64(0) == StateStore.schemaVersion)
            #expect(try reopened.account(named: aliceId)?.upn == "alice@contoso.com")
            #expect(try reopened.auditTail() == nil)
            try reopened.setAuditTail(AuditTail(seq: 3, hash: String(repeating: "a", count: 64)))
            try reopened.setAuditTail(AuditTail(seq: 4, hash: String(repeating: "b", count: 64)))
            #expect(try reopened.auditTail() == AuditTail(seq: 4, hash: String(repeating: "b", count: 64)))
        }
    }

    @Test func missingStateIsFileNotFoundAndCreatesNothing() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp.appendingPathComponent("nostate"))
            #expect {
                _ = try StateStore.open(directory: dir, create: false)
            } throws: { error in
                isError(error) { error in
                    guard case .fileNotFound(let message) = error else { return false }
                    return message == "no mamfs state in \(dir.url.path) (run 'mamfs init')"
                }
            }
            #expect(!dir.exists)
            // An existing directory without a database is still "no state".
            try dir.create()
            #expect(throws: MAMError.fileNotFound("no mamfs state in \(dir.url.path) (run 'mamfs init')")) {
                _ = try StateStore.open(directory: dir, create: false)
            }
            #expect(!dir.databaseExists)
        }
    }

    @Test func directoryIs0700AndDatabaseFilesAre0600() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp.appendingPathComponent("deep/state"))
            let store = try StateStore.open(directory: dir, create: true)
            try store.setMetaValue(Data([1, 2, 3]), forKey: "k")
            #expect(permissionBits(dir.url.path) == 0o700)
            #expect(permissionBits(dir.databaseURL.path) == 0o600)
            for suffix in ["-wal", "-shm"] {
                let path = dir.databaseURL.path + suffix
                if FileManager.default.fileExists(atPath: path) {
                    #expect(permissionBits(path) == 0o600, "\(suffix)")
                }
            }
        }
    }

    @Test func newerSchemaVersionIsRejected() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp)
            let store = try StateStore.open(directory: dir, create: true)
            try store.database.execute("PRAGMA user_version = 7")
            store.close()
            #expect {
                _ = try StateStore.open(directory: dir, create: false)
            } throws: { error in
                isError(error) { error in
                    guard case .newerVersion(let message) = error else { return false }
                    return message.contains("schema version 7") && error.exitCode == .dataErr
                }
            }
        }
    }

    // MARK: meta

    @Test func metaValuesRoundTrip() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            #expect(try store.metaValue("salt") == nil)
            try store.setMetaValue(Data([0, 255, 7]), forKey: "salt")
            #expect(try store.metaValue("salt") == Data([0, 255, 7]))
            try store.setMetaValue(Data(), forKey: "salt")
            #expect(try store.metaValue("salt") == Data())
            #expect(try store.deleteMetaValue("salt"))
            #expect(try !store.deleteMetaValue("salt"))
            #expect(try store.metaValue("salt") == nil)
        }
    }

    // MARK: accounts

    @Test func accountIsFoundByIdOrUPNInAnyCase() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            let stored = try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "Alice@Contoso.COM", managed: true,
                                                               policyJSON: "{\"a\":1}"))
            let expected = AccountRecord(accountId: aliceId.lowercased(), upn: "alice@contoso.com", managed: true,
                                         policyJSON: "{\"a\":1}")
            #expect(stored == expected)
            for name in [aliceId, aliceId.lowercased(), "alice@contoso.com", "ALICE@CONTOSO.COM", " Alice@contoso.com "] {
                #expect(try store.account(named: name) == expected, "\(name)")
            }
            #expect(try store.account(named: "bob@contoso.com") == nil)
            #expect(try store.account(named: bobId) == nil)
            #expect(try store.account(named: "") == nil)
        }
    }

    @Test func duplicateUPNIsRejected() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            #expect {
                try store.upsertAccount(AccountRecord(accountId: bobId, upn: "ALICE@contoso.com", managed: false))
            } throws: { error in
                isError(error) { error in
                    guard case .invalidArguments(let message) = error else { return false }
                    return message.contains("already registered")
                }
            }
            #expect(try store.account(named: bobId) == nil)
            // Re-upserting the same account with its own UPN is an update, not a duplicate.
            try store.upsertAccount(AccountRecord(accountId: aliceId.lowercased(), upn: "alice@contoso.com", managed: false))
            #expect(try store.account(named: "alice@contoso.com")?.managed == false)
            #expect(try store.allAccounts().count == 1)
        }
    }

    @Test func malformedAccountIdsAndUPNsAreRejected() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            #expect(throws: MAMError.self) { try store.upsertAccount(AccountRecord(accountId: "alice", managed: true)) }
            #expect(throws: MAMError.self) {
                try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "not a upn", managed: true))
            }
            #expect(try store.allAccounts().isEmpty)
        }
    }

    @Test func accountUpdatesListingAndDeletion() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            try store.upsertAccount(AccountRecord(accountId: carolId, upn: "carol@contoso.com", managed: false))
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            try store.upsertAccount(AccountRecord(accountId: bobId, managed: true))
            #expect(try store.allAccounts().map(\.accountId) == [aliceId.lowercased(), bobId, carolId])
            #expect(try store.managedAccounts().map(\.accountId) == [aliceId.lowercased(), bobId])

            try store.setManaged(aliceId, managed: false)
            try store.setManaged(carolId.uppercased(), managed: true)
            #expect(try store.managedAccounts().map(\.accountId) == [bobId, carolId])

            try store.setPolicy(bobId, json: "{\"allowCopy\":false}")
            #expect(try store.account(named: bobId)?.policyJSON == "{\"allowCopy\":false}")
            try store.setPolicy(bobId, json: nil)
            #expect(try store.account(named: bobId)?.policyJSON == nil)

            try store.markWiped(bobId, at: 1_700_000_000)
            #expect(try store.account(named: bobId)?.wipedAt == 1_700_000_000)
            #expect(try store.account(named: bobId)?.managed == true)

            #expect(throws: MAMError.unknownAccount("8c7f3e1a-0000-4000-8000-00000000000f")) {
                try store.setManaged("8c7f3e1a-0000-4000-8000-00000000000F", managed: true)
            }
            #expect(try store.deleteAccount(bobId))
            #expect(try !store.deleteAccount(bobId))
            #expect(try store.account(named: bobId) == nil)
            #expect(try store.allAccounts().count == 2)
        }
    }

    // MARK: account keys

    @Test func keysAreInsertedLookedUpAndDeleted() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, managed: true))
            try store.upsertAccount(AccountRecord(accountId: bobId, managed: true))
            #expect(try store.latestAccountKeyId(aliceId) == nil)
            #expect(try store.nextAccountKeyId(aliceId) == 1)

            let k1 = Data(repeating: 0xA1, count: 60)
            let k2 = Data(repeating: 0xA2, count: 60)
            try store.insertAccountKey(aliceId, keyId: 1, wrapped: k1)
            try store.insertAccountKey(aliceId.lowercased(), keyId: 2, wrapped: k2)
            try store.insertAccountKey(bobId, keyId: 1, wrapped: Data([0xB1]))
            #expect(try store.accountKey(aliceId, keyId: 1) == k1)
            #expect(try store.accountKey(aliceId.lowercased(), keyId: 2) == k2)
            #expect(try store.accountKey(aliceId, keyId: 3) == nil)
            #expect(try store.latestAccountKeyId(aliceId) == 2)
            #expect(try store.nextAccountKeyId(aliceId) == 3)

            #expect(try store.deleteAccountKeys(aliceId) == 2)
            #expect(try store.accountKey(aliceId, keyId: 1) == nil)
            #expect(try store.latestAccountKeyId(aliceId) == nil)
            #expect(try store.deleteAccountKeys(aliceId) == 0)
            #expect(try store.accountKey(bobId, keyId: 1) == Data([0xB1]), "other accounts keep their keys")
        }
    }

    @Test func keyIdsAreNeverReusedAfterDeletion() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            #expect(try store.addAccountKey(aliceId) { _ in Data([1]) } == 1)
            #expect(try store.addAccountKey(aliceId) { _ in Data([2]) } == 2)
            try store.deleteAccountKeys(aliceId)
            #expect(try store.nextAccountKeyId(aliceId) == 3)
            #expect(throws: MAMError.self) { try store.insertAccountKey(aliceId, keyId: 1, wrapped: Data([9])) }
            #expect(throws: MAMError.self) { try store.insertAccountKey(aliceId, keyId: 2, wrapped: Data([9])) }
            #expect(try store.accountKey(aliceId, keyId: 1) == nil)

            // Unenroll with wipe, then re-enroll: the counter survives the account row.
            #expect(try store.addAccountKey(aliceId) { _ in Data([3]) } == 3)
            #expect(try store.deleteAccount(aliceId))
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            #expect(try store.nextAccountKeyId(aliceId) == 4)
            #expect(throws: MAMError.self) { try store.insertAccountKey(aliceId, keyId: 3, wrapped: Data([9])) }
            try store.insertAccountKey(aliceId, keyId: 4, wrapped: Data([4]))
            #expect(try store.latestAccountKeyId(aliceId) == 4)

            // The counter lives in the file, not in this instance.
            store.close()
            let reopened = try StateStore.open(directory: StateDirectory(url: tmp), create: false)
            try reopened.deleteAccountKeys(aliceId)
            #expect(try reopened.nextAccountKeyId(aliceId) == 5)
        }
    }

    @Test func addAccountKeyPassesTheIdToWrapAndStoresNothingWhenWrapThrows() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, managed: true))
            let id = try store.addAccountKey(aliceId) { keyId in Data("key-\(keyId)".utf8) }
            #expect(try store.accountKey(aliceId, keyId: id) == Data("key-1".utf8))
            #expect(throws: MAMError.failedToEncrypt("boom")) {
                try store.addAccountKey(aliceId) { _ in throw MAMError.failedToEncrypt("boom") }
            }
            #expect(try store.latestAccountKeyId(aliceId) == 1)
            #expect(try store.nextAccountKeyId(aliceId) == 2)
        }
    }

    @Test func keysOfUnknownAccountsAreRejected() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            #expect(throws: MAMError.unknownAccount(aliceId.lowercased())) {
                try store.insertAccountKey(aliceId, keyId: 1, wrapped: Data([1]))
            }
        }
    }

    @Test func deletedKeyBytesDoNotRemainInTheDatabaseOrItsWAL() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp)
            let store = try StateStore.open(directory: dir, create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, managed: true))
            let marker = Data((0..<48).map { UInt8(($0 * 37 + 11) & 0xff) })
            try store.insertAccountKey(aliceId, keyId: 1, wrapped: marker)
            for i in 0..<50 { try store.setMetaValue(Data(repeating: UInt8(i), count: 100), forKey: "filler\(i)") }

            func filesContainMarker() throws -> Bool {
                for path in [dir.databaseURL.path, dir.databaseURL.path + "-wal"] {
                    guard FileManager.default.fileExists(atPath: path) else { continue }
                    if try Data(contentsOf: URL(fileURLWithPath: path)).range(of: marker) != nil { return true }
                }
                return false
            }
            #expect(try filesContainMarker(), "the marker must be findable before the delete, or the test proves nothing")
            #expect(try store.deleteAccountKeys(aliceId) == 1)
            #expect(try !filesContainMarker())
        }
    }

    // MARK: known roots

    @Test func knownRootsAreAddedListedUpdatedAndRemoved() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            try store.addKnownRoot("/srv/backing/", kind: .backing, accountId: aliceId)
            try store.addKnownRoot("/home/u/docs", kind: .protected)
            try store.addKnownRoot("/var/replica", kind: .root)
            var roots = try store.knownRoots()
            #expect(roots.map(\.path) == ["/home/u/docs", "/srv/backing", "/var/replica"])
            #expect(roots.map(\.kind) == [.protected, .backing, .root])
            #expect(roots[1].accountId == aliceId.lowercased())
            #expect(roots[0].accountId == nil)
            #expect(roots.allSatisfy { $0.addedAt != nil })

            try store.addKnownRoot("/srv/backing", kind: .protected, accountId: nil)
            roots = try store.knownRoots()
            #expect(roots.count == 3)
            #expect(roots[1] == KnownRoot(path: "/srv/backing", kind: .protected, accountId: nil, addedAt: roots[1].addedAt))

            #expect(try store.removeKnownRoot("/srv/backing/"))
            #expect(try !store.removeKnownRoot("/srv/backing"))
            #expect(try store.knownRoots().map(\.path) == ["/home/u/docs", "/var/replica"])
        }
    }

    @Test func invalidRootKindIsRejectedByTheSchema() throws {
        try withStateStoreTestDir { tmp in
            let store = try StateStore.open(directory: StateDirectory(url: tmp), create: true)
            #expect(throws: MAMError.self) {
                try store.database.run("INSERT INTO known_roots(path, kind) VALUES ('/x', 'other')")
            }
        }
    }

    // MARK: several connections

    @Test func dataVersionChangesWhenASecondStoreCommits() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp)
            let mount = try StateStore.open(directory: dir, create: true)
            let cli = try StateStore.open(directory: dir, create: false)
            let before = try mount.dataVersion()
            #expect(try mount.dataVersion() == before, "no commit, no change")
            try mount.setMetaValue(Data([1]), forKey: "own")
            #expect(try mount.dataVersion() == before, "a connection's own commits do not change its data_version")

            try cli.upsertAccount(AccountRecord(accountId: aliceId, managed: true))
            let after = try mount.dataVersion()
            #expect(after != before)
            #expect(try mount.account(named: aliceId)?.managed == true)

            try cli.setManaged(aliceId, managed: false)
            #expect(try mount.dataVersion() != after)
        }
    }

    @Test func concurrentWritersOnTwoStoresNeverSeeBusy() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp)
            let first = try StateStore.open(directory: dir, create: true)
            let second = try StateStore.open(directory: dir, create: false)
            let ids = (0..<8).map { String(format: "8c7f3e1a-0000-4000-8000-%012d", $0 + 100) }
            for id in ids { try first.upsertAccount(AccountRecord(accountId: id, managed: true)) }

            let failures = FailureLog()
            let done = DispatchGroup()
            let keysPerThread = 40
            for (index, id) in ids.enumerated() {
                let store = index.isMultiple(of: 2) ? first : second
                done.enter()
                let thread = Thread {
                    defer { done.leave() }
                    do {
                        for j in 0..<keysPerThread {
                            try store.addAccountKey(id) { keyId in Data("\(id)/\(keyId)".utf8) }
                            try store.setMetaValue(Data([UInt8(j)]), forKey: "counter-\(index)")
                            try store.setPolicy(id, json: "{\"n\":\(j)}")
                            _ = try store.dataVersion()
                        }
                    } catch {
                        failures.add("\(id): \(error)")
                    }
                }
                thread.start()
            }
            done.wait()
            #expect(failures.all.isEmpty, "\(failures.all)")
            for id in ids {
                #expect(try first.latestAccountKeyId(id) == UInt32(keysPerThread))
                #expect(try second.accountKey(id, keyId: 7) == Data("\(id)/7".utf8))
            }
            #expect(first.integrityCheck())
        }
    }

    // MARK: integrity

    @Test func integrityCheckPassesOnAHealthyDatabaseAndFailsOnACorruptOne() throws {
        try withStateStoreTestDir { tmp in
            let dir = StateDirectory(url: tmp)
            let store = try StateStore.open(directory: dir, create: true)
            try store.upsertAccount(AccountRecord(accountId: aliceId, upn: "alice@contoso.com", managed: true))
            for i in 0..<200 { try store.setMetaValue(Data(repeating: 7, count: 200), forKey: "k\(i)") }
            #expect(store.integrityCheck())
            store.close()

            // Overwrite the body of the last page (a meta b-tree page) with garbage.
            let handle = try FileHandle(forUpdating: dir.databaseURL)
            let size = try handle.seekToEnd()
            #expect(size >= 3 * 4096)
            try handle.seek(toOffset: size - 4096)
            try handle.write(contentsOf: Data(repeating: 0x5A, count: 4096))
            try handle.close()

            let reopened = try StateStore.open(directory: dir, create: false)
            #expect(!reopened.integrityCheck())
        }
    }
}
