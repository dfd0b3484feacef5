import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMSystem
import MAMTestSupport

/// The replicated pass's batches (`ProvidedCopyBatch`): fetched items are made durable with a
/// syncfs before and after their renames, a batch at a time, and recorded only after that.
@Suite("Replicated provider: batched durability")
struct ReplicatedBatchTests {
    /// A remote tree of `directories` x `perDirectory` files of random sizes (one of 2.5 MiB, one
    /// empty), modes 0644, 0600 or 0755, and a symlink. Returns relative path -> bytes of every file.
    @discardableResult
    static func writeTree(_ f: ProviderFixture, directories: Int, perDirectory: Int) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for d in 0..<directories {
            for i in 0..<perDirectory {
                let relative = "dir\(d)/f\(i).txt"
                let seed = UInt64(d * 1000 + i)
                let size = (d == 0 && i == 1) ? 0 : Int(seed * 7919 % 9000) + 1
                files[relative] = randomBytes(size, seed: seed)
            }
        }
        files["large.bin"] = randomBytes(5 << 19, seed: 77)
        for (relative, bytes) in files {
            try f.writeRemote(relative, bytes)
            let mode: mode_t = [0o644, 0o600, 0o755][relative.utf8.count % 3]
            #expect(chmod(f.remotePath(relative), mode) == 0)
        }
        #expect(symlink("dir0/f0.txt", f.remotePath("link")) == 0)
        return files
    }

    /// Every recorded item is in place with the stamp it was recorded with; every file of
    /// `files` is in the replica encrypted for the managed account with its remote plaintext and
    /// mode; nothing of the pass is left in the temp area.
    static func expectReplica(_ f: ProviderFixture, _ provider: ReplicatedProvider, files: [String: [UInt8]],
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectRecordsInPlace(f, provider, sourceLocation: sourceLocation)
        let recorded = Set(try provider.binding.database.allItems().map(\.localPath))
        for (relative, bytes) in files {
            let path = f.localPath(relative)
            let header = try f.header(path)
            #expect(header?.isEncrypted == true, "\(relative) is encrypted", sourceLocation: sourceLocation)
            #expect(header?.owner == ProviderFixture.managedId, "\(relative) belongs to the account", sourceLocation: sourceLocation)
            #expect(try f.plaintext(path) == bytes, "\(relative) holds the remote bytes", sourceLocation: sourceLocation)
            var local = stat(), remote = stat()
            #expect(lstat(path, &local) == 0 && lstat(f.remotePath(relative), &remote) == 0)
            #expect(local.st_mode & 0o777 == remote.st_mode & 0o777, "\(relative): mode", sourceLocation: sourceLocation)
            #expect(recorded.contains(relative), "\(relative) is recorded", sourceLocation: sourceLocation)
        }
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty, "\(f.leftoverTemporaryFiles(under: f.localRoot))",
                sourceLocation: sourceLocation)
    }

    /// The rule of the batches: no row names an item whose file is not in place as recorded.
    static func expectRecordsInPlace(_ f: ProviderFixture, _ provider: ReplicatedProvider,
                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        for row in try provider.binding.database.allItems() where row.identifier != .rootContainer && !row.localPath.isEmpty {
            var st = stat()
            guard lstat(f.localPath(row.localPath), &st) == 0 else {
                Issue.record("\(row.localPath) is recorded but not in the replica", sourceLocation: sourceLocation)
                continue
            }
            if row.type != .directory {
                #expect(LocalStamp(st) == row.local, "\(row.localPath): recorded stamp", sourceLocation: sourceLocation)
            }
            if row.type == .file {
                #expect(try f.plaintext(f.localPath(row.localPath)) == f.read(f.remotePath(row.localPath)),
                        "\(row.localPath): recorded and holding the remote bytes", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("a first sync of many files in several batches: every file encrypted for the account with its plaintext and mode, two syncfs per batch, no fsync per file")
    func firstSyncInBatches() throws {
        let f = try ProviderFixture()
        let files = try Self.writeTree(f, directories: 3, perDirectory: 20)
        let provider = try ReplicatedProvider(replicaRoot: f.localRoot, domain: f.domain(),
                                              batchLimits: .init(items: 16, bytes: 1 << 20))
        let report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        let items = files.count + 3 + 1
        #expect(report.fetched == items, "61 files, 3 directories, 1 symlink")
        try Self.expectReplica(f, provider, files: files)
        #expect(try SymbolicLink.readLinkString(f.localPath("link")) == "dir0/f0.txt")
        // 65 items in batches of 16 or more (a batch takes the downloads finished when it is
        // full), each synced before and after its renames; never a sync per file.
        let calls = provider.durability.calls
        #expect(calls >= 2 && calls <= 2 * (items / 16 + 2) && calls % 2 == 0, "\(calls) syncfs calls")
        let again = provider.syncOnce()
        #expect(again.isClean && again.fetched == 0, "\(again)")
        #expect(provider.durability.calls == calls, "a pass that fetches nothing syncs nothing")
        f.expectRemotePlain()
    }

    @Test("the provided copies follow fileProviderEncryptFiles alone: encrypted when only it is set (fileEncryptionRequired off), plain-tagged for the account when it is off",
          arguments: [true, false])
    func providedCopiesFollowThePolicy(encryptProvided: Bool) throws {
        var policy = Policy.demoEncrypting
        policy.fileEncryptionRequired = false
        policy.fileProviderEncryptFiles = encryptProvided
        let f = try ProviderFixture(policy: policy)
        let files = try Self.writeTree(f, directories: 1, perDirectory: 5)
        let report = try f.replicated().syncOnce()
        #expect(report.isClean && report.fetched == files.count + 2, "\(report)")
        for (relative, bytes) in files {
            let header = try f.header(f.localPath(relative))
            #expect(header?.owner == ProviderFixture.managedId, "\(relative)")
            #expect(header?.isEncrypted == encryptProvided, "\(relative)")
            #expect(try f.plaintext(f.localPath(relative)) == bytes, "\(relative)")
            if !encryptProvided, let header {
                #expect(Array(try f.read(f.localPath(relative)).dropFirst(header.length)) == bytes, "\(relative): plain after its tag")
            }
        }
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)
        f.expectRemotePlain()
    }

    @Test("a remote item that fails to download in the middle of a batch: the others are placed and recorded, it is reported, not recorded, no temp left; the next pass fetches it")
    func downloadFailureMidBatch() throws {
        let f = try ProviderFixture()
        let files = try Self.writeTree(f, directories: 1, perDirectory: 20)
        let failing: Set<ItemIdentifier> = [ItemIdentifier("dir0/f3.txt"), ItemIdentifier("dir0/f11.txt")]
        let store = FailingReadRemote(f.remote(), failing: failing)
        let provider = try ReplicatedProvider(replicaRoot: f.localRoot, domain: f.domain(remote: store),
                                              batchLimits: .init(items: 64, bytes: 64 << 20))
        let report = provider.syncOnce()
        #expect(Set(report.errors.map(\.path)) == ["dir0/f3.txt", "dir0/f11.txt"], "\(report.errors)")
        #expect(report.fetched == files.count + 1 + 1 - 2)
        for relative in ["dir0/f3.txt", "dir0/f11.txt"] {
            #expect(!f.exists(f.localPath(relative)))
            #expect(try provider.binding.database.item(localPath: relative) == nil)
        }
        try Self.expectRecordsInPlace(f, provider)
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)

        let next = try f.replicated().syncOnce()
        #expect(next.isClean && next.fetched == 2 && next.conflicts == 0, "\(next)")
        try Self.expectReplica(f, try f.replicated(), files: files)
    }

    @Test("the syncfs before the renames fails: nothing is renamed into the replica or recorded, no temp left; the next pass fetches everything")
    func syncBeforeRenamesFails() throws {
        let f = try ProviderFixture()
        let files = try Self.writeTree(f, directories: 2, perDirectory: 5)
        let sync = FailingSync(failing: [1])
        let provider = try ReplicatedProvider(replicaRoot: f.localRoot, domain: f.domain(),
                                              batchLimits: .init(items: 64, bytes: 64 << 20), durability: sync)
        let report = provider.syncOnce()
        #expect(report.fetched == 0)
        #expect(report.errors.count == files.count + 2 + 1, "every staged item reported: \(report.errors)")
        #expect(report.errors.allSatisfy { $0.errno == EIO }, "\(report.errors)")
        #expect(sync.calls == 1, "no rename, so no second sync")
        #expect(f.files(under: f.localRoot).isEmpty, "no file renamed into the replica")
        #expect(try provider.binding.database.allItems().filter { $0.identifier != .rootContainer }.isEmpty, "nothing recorded")
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)

        let next = try f.replicated().syncOnce()
        #expect(next.isClean && next.conflicts == 0, "\(next)")
        try Self.expectReplica(f, try f.replicated(), files: files)
    }

    @Test("the syncfs after the renames fails (as a pass killed before recording): nothing recorded; the next pass finds the copies identical and records them, no conflict copies, nothing fetched again")
    func syncAfterRenamesFails() throws {
        let f = try ProviderFixture()
        let files = try Self.writeTree(f, directories: 2, perDirectory: 5)
        let sync = FailingSync(failing: [2])
        let provider = try ReplicatedProvider(replicaRoot: f.localRoot, domain: f.domain(),
                                              batchLimits: .init(items: 64, bytes: 64 << 20), durability: sync)
        let report = provider.syncOnce()
        #expect(report.fetched == 0)
        #expect(!report.errors.isEmpty && report.errors.allSatisfy { $0.errno == EIO }, "\(report.errors)")
        #expect(try provider.binding.database.allItems().filter { $0.identifier != .rootContainer }.isEmpty, "nothing recorded")
        #expect(f.files(under: f.localRoot).count == files.count, "the copies are in place")
        let inodes = Dictionary(uniqueKeysWithValues: files.keys.map { ($0, f.inode(f.localPath($0))) })

        let counted = ReplicaSync()
        let next = try ReplicatedProvider(replicaRoot: f.localRoot, domain: f.domain(),
                                          batchLimits: .standard, durability: counted).syncOnce()
        #expect(next.isClean, "\(next.errors)")
        #expect(next.conflicts == 0 && next.created == 0, "identical copies are no conflict: \(next)")
        #expect(f.files(under: f.localRoot).count == files.count, "no conflict copies")
        for (relative, inode) in inodes { #expect(f.inode(f.localPath(relative)) == inode, "\(relative) kept, not fetched again") }
        #expect(counted.calls == 1, "recorded after one syncfs (nothing renamed)")
        try Self.expectReplica(f, try f.replicated(), files: files)
        let third = try f.replicated().syncOnce()
        #expect(third.isClean && third.fetched == 0 && third.created == 0 && third.modified == 0, "\(third)")
        f.expectRemotePlain()
    }

    @Test("a local file that is not the remote's stays a conflict: a local file at a new remote item's path with other bytes, or with the same bytes but not encrypted for the account")
    func differentLocalFileIsStillAConflict() throws {
        let f = try ProviderFixture()
        try f.writeRemote("other.txt", Array("remote bytes".utf8))
        try f.writeRemote("plain.txt", Array("same bytes".utf8))
        try f.writeLocalProtected("other.txt", Array("local bytes!".utf8))
        try f.write(f.localPath("plain.txt"), Array("same bytes".utf8))
        let report = try f.replicated().syncOnce()
        #expect(report.conflicts == 2, "\(report)")
        #expect(try f.plaintext(f.localPath("other.txt")) == Array("remote bytes".utf8))
        #expect(try f.header(f.localPath("plain.txt"))?.isEncrypted == true)
        let copies = f.files(under: f.localRoot).filter { $0.contains("(conflict ") }
        #expect(copies.count == 2, "\(f.files(under: f.localRoot))")
    }

    // MARK: The batch itself

    /// A replica root with its metadata directory, as a pass has it.
    private static func replica(_ f: ProviderFixture) throws -> (ProviderLayout, ConfinedDirectory) {
        let layout = ProviderLayout(root: f.localRoot)
        try layout.prepare()
        return (layout, try layout.confined())
    }

    private static func stage(_ layout: ProviderLayout, _ bytes: String) throws -> MAMFileProvider.TemporaryFile {
        try layout.makeTemporaryFile(name: "x") { fd in
            #expect(pwrite(fd, bytes, bytes.utf8.count, 0) == bytes.utf8.count)
        }
    }

    @Test("commit: a new name taken meanwhile is not replaced (RENAME_NOREPLACE), a replaced file changed meanwhile is kept, the others are placed; temps removed; two syncs")
    func commitKeepsLocalChanges() throws {
        let f = try ProviderFixture()
        let (layout, tree) = try Self.replica(f)
        try f.write(f.localPath("changed.txt"), Array("old".utf8))
        var st = stat()
        #expect(lstat(f.localPath("changed.txt"), &st) == 0)
        let batch = ProvidedCopyBatch<String>(limits: .standard)
        for name in ["new.txt", "appeared.txt"] {
            batch.add(.init(relative: name, source: .copy(try Self.stage(layout, "copy of \(name)")), expecting: nil, payload: name))
        }
        batch.add(.init(relative: "changed.txt", source: .copy(try Self.stage(layout, "copy of changed.txt")), expecting: LocalStamp(st),
                        payload: "changed.txt"))
        // Meanwhile: a local program makes appeared.txt and rewrites changed.txt (a new inode).
        try f.write(f.localPath("appeared.txt"), Array("local".utf8))
        try f.write(f.localPath("changed.txt"), Array("edited".utf8))
        var syncs = 0
        var results = batch.commit(in: tree) { syncs += 1 }
        #expect(batch.isEmpty)
        #expect(syncs == 2)
        let outcomes = Dictionary(uniqueKeysWithValues: results.map { ($0.entry.payload, $0.outcome) })
        results = []
        guard case .placed = outcomes["new.txt"] else { Issue.record("new.txt: \(String(describing: outcomes["new.txt"]))"); return }
        guard case .failed(let appeared) = outcomes["appeared.txt"], case .failed(let changed) = outcomes["changed.txt"] else {
            Issue.record("\(outcomes)"); return
        }
        #expect(SyncIssue(path: "", error: appeared).message.contains("appeared during the sync"), "\(appeared)")
        #expect(SyncIssue(path: "", error: changed).errno == EAGAIN, "\(changed)")
        #expect(try f.read(f.localPath("new.txt")) == Array("copy of new.txt".utf8))
        #expect(try f.read(f.localPath("appeared.txt")) == Array("local".utf8))
        #expect(try f.read(f.localPath("changed.txt")) == Array("edited".utf8))
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)
    }

    @Test("commit: a failed sync before the renames places nothing and removes every temp; one after them fails every entry (none may be recorded) though the files are in place")
    func commitWithFailingSync() throws {
        let f = try ProviderFixture()
        let (layout, tree) = try Self.replica(f)
        let batch = ProvidedCopyBatch<Int>(limits: .standard)
        for i in 0..<3 { batch.add(.init(relative: "f\(i)", source: .copy(try Self.stage(layout, "\(i)")), expecting: nil, payload: i)) }
        var results = batch.commit(in: tree) { throw MAMError.system("syncfs", errno: EIO) }
        #expect(results.count == 3)
        #expect(results.allSatisfy { if case .failed = $0.outcome { true } else { false } })
        #expect(f.files(under: f.localRoot).isEmpty)
        results = []
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)

        for i in 0..<3 { batch.add(.init(relative: "f\(i)", source: .copy(try Self.stage(layout, "\(i)")), expecting: nil, payload: i)) }
        var calls = 0
        results = batch.commit(in: tree) {
            calls += 1
            if calls == 2 { throw MAMError.system("syncfs", errno: EIO) }
        }
        #expect(results.allSatisfy { if case .failed = $0.outcome { true } else { false } })
        #expect(f.files(under: f.localRoot) == ["f0", "f1", "f2"])
        #expect(try f.read(f.localPath("f1")) == Array("1".utf8))
        results = []
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)
    }

    @Test("a batch is full at its item count or its byte count, whichever comes first")
    func limits() throws {
        let batch = ProvidedCopyBatch<Int>(limits: .init(items: 3, bytes: 100))
        batch.add(.init(relative: "a", source: .inPlace, expecting: nil, payload: 0), bytes: 10)
        batch.add(.init(relative: "b", source: .inPlace, expecting: nil, payload: 1), bytes: 10)
        #expect(!batch.isFull)
        batch.add(.init(relative: "c", source: .inPlace, expecting: nil, payload: 2))
        #expect(batch.isFull)
        let bytes = ProvidedCopyBatch<Int>(limits: .init(items: 3, bytes: 100))
        bytes.add(.init(relative: "a", source: .inPlace, expecting: nil, payload: 0), bytes: 100)
        #expect(bytes.isFull)
    }
}

/// A `ReplicaSync` whose calls number `failing` (1-based) fail with EIO; it counts like the real one.
final class FailingSync: ReplicaSync, @unchecked Sendable {
    private let failing: Set<Int>
    private let lock = NSLock()
    private var number = 0

    init(failing: Set<Int>) {
        self.failing = failing
        super.init()
    }

    override func sync(_ descriptor: Int32, root: String) throws {
        let call = lock.withLock { number += 1; return number }
        if failing.contains(call) {
            throw MAMError.system("syncfs of the filesystem of \(root)", errno: EIO)
        }
        try super.sync(descriptor, root: root)
    }

    override var calls: Int { lock.withLock { number } }
}

/// A store whose reads of `failing` items fail (the server answers an error for those files).
final class FailingReadRemote: HookedRemote, @unchecked Sendable {
    let failing: Set<ItemIdentifier>

    init(_ inner: any RemoteStore, failing: Set<ItemIdentifier>) {
        self.failing = failing
        super.init(inner)
    }

    override func checkRead(_ identifier: ItemIdentifier) throws {
        if failing.contains(identifier) { throw RemoteError.failed("'\(identifier)': the server answered 500") }
    }
}
