import CSystem
import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// `cafe` + COMBINING ACUTE ACCENT (NFD) and `caf` + LATIN SMALL LETTER E WITH ACUTE (NFC):
/// different bytes, equal as Swift strings.
private let nfdName = "cafe\u{0301}"
private let nfcName = "caf\u{00E9}"

/// The names in `directory` as the kernel stores them (raw bytes, nothing decoded or merged).
private func rawNames(_ directory: String) -> [[UInt8]] {
    guard let dir = opendir(directory) else { return [] }
    defer { closedir(dir) }
    var names: [[UInt8]] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
        if name != Array(".".utf8) && name != Array("..".utf8) { names.append(name) }
    }
    return names.sorted { $0.lexicographicallyPrecedes($1) }
}

/// Every file below `directory` with its bytes, keyed by the raw byte path (a snapshot that
/// sees a change made through any name).
private func byteSnapshot(_ directory: String) -> [[UInt8]: [UInt8]] {
    var result: [[UInt8]: [UInt8]] = [:]
    func walk(_ path: [UInt8], _ relative: [UInt8]) {
        let pathString = String(decoding: path, as: UTF8.self)
        for name in rawNames(pathString) {
            let child = path + [0x2F] + name
            let childRelative = relative.isEmpty ? name : relative + [0x2F] + name
            var st = stat()
            let ok = (child + [0]).withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { lstat($0, &st) }
            }
            guard ok == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                result[childRelative + [0x2F]] = []
                walk(child, childRelative)
            } else {
                let fd = (child + [0]).withUnsafeBufferPointer { buffer in
                    buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { open($0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) }
                }
                var bytes: [UInt8] = []
                if fd >= 0 {
                    var chunk = [UInt8](repeating: 0, count: 65536)
                    while true {
                        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                        if n <= 0 { break }
                        bytes += chunk[0..<n]
                    }
                    close(fd)
                }
                result[childRelative] = bytes
            }
        }
    }
    walk(Array(directory.utf8), [])
    return result
}

/// Runs `body` on its own thread and waits at most `seconds` (nominal, stretched by `Patience`)
/// for it.
/// - Returns: true when it finished in time.
private func finishes(within seconds: Double, _ body: @escaping () -> Void) -> Bool {
    final class Job: @unchecked Sendable {
        let body: () -> Void
        let done = DispatchSemaphore(value: 0)
        init(_ body: @escaping () -> Void) { self.body = body }
    }
    let job = Job(body)
    Thread.detachNewThread {
        job.body()
        job.done.signal()
    }
    let done = job.done
    return done.wait(timeout: Patience.deadline(seconds)) == .success
}

/// Unblocks whoever waits in open(2) on the FIFO at `path` (a reader waiting for a writer).
private func releaseFIFO(_ path: String) {
    let fd = open(path, O_WRONLY | O_NONBLOCK)
    if fd >= 0 { close(fd) }
}

@Suite("Security: file providers confine the local root")
struct SecurityProviderTests {
    /// The hostile remote: a symlink `cafe`+U+0301 to a directory outside, and a real directory
    /// `caf`+U+00E9 holding a file. The outside directory holds one file of its own.
    private func hostileRemote(_ f: ProviderFixture) throws -> [UInt8] {
        try f.write(f.outside + "/keep.txt", Array("outside, untouched\n".utf8))
        guard symlink(f.outside, f.remotePath(nfdName)) == 0 else { throw MAMError.fromErrno("symlink") }
        guard mkdir(f.remotePath(nfcName), 0o755) == 0 else { throw MAMError.fromErrno("mkdir") }
        let inner = Array("the real directory's file\n".utf8)
        try f.write(f.remotePath(nfcName + "/inner.txt"), inner)
        return inner
    }

    @Test("replicated sync: NFC and NFD remote names stay two items, nothing is written through the remote's symlink")
    func replicatedNormalizationTwins() throws {
        let f = try ProviderFixture()
        let inner = try hostileRemote(f)
        let before = byteSnapshot(f.outside)
        let report = try f.replicated().syncOnce()
        #expect(byteSnapshot(f.outside) == before, "the sync wrote outside the replica: \(report.errors)")
        #expect(rawNames(f.localRoot).contains(Array(nfcName.utf8)), "the NFC directory is missing locally")
        #expect(rawNames(f.localRoot).contains(Array(nfdName.utf8)), "the NFD symlink is missing locally")
        var st = stat()
        #expect(lstat(f.localPath(nfdName), &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK)
        #expect(lstat(f.localPath(nfcName), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR)
        #expect(rawNames(f.localPath(nfcName)) == [Array("inner.txt".utf8)])
        #expect(try f.plaintext(f.localPath(nfcName + "/inner.txt")) == inner)
        #expect(try f.header(f.localPath(nfcName + "/inner.txt"))?.owner == ProviderFixture.managedId)
        // A second pass changes nothing and still writes nothing outside.
        _ = try f.replicated().syncOnce()
        #expect(byteSnapshot(f.outside) == before)
        f.expectRemotePlain()
    }

    // Local remote only: the point is a symlink on the remote, which WebDAV has not (the NFC and
    // NFD spellings as two WebDAV items are in the contract suite's awkwardNames).
    @Test("non-replicated placeholders: NFC and NFD remote names stay two items, nothing is written through the remote's symlink")
    func nonReplicatedNormalizationTwins() throws {
        let f = try ProviderFixture()
        let inner = try hostileRemote(f)
        let before = byteSnapshot(f.outside)
        let provider = try f.nonReplicated()
        let report = try provider.createPlaceholders()
        #expect(byteSnapshot(f.outside) == before, "placeholders were written outside the root: \(report.errors)")
        let placeholder = f.localPath(nfcName + "/inner.txt")
        #expect(NonReplicatedProvider.placeholderInfo(localPath: placeholder)?.identifier.rawValue.utf8.elementsEqual((nfcName + "/inner.txt").utf8) == true)
        try provider.startProvidingItem(localPath: placeholder)
        #expect(try f.plaintext(placeholder) == inner)
        #expect(byteSnapshot(f.outside) == before)
        f.expectRemotePlain()
    }

    /// A remote that holds its own `.mamfs-provider` (a file and a `tmp/x`) next to a real file,
    /// read through a store (of the fixture's kind) whose skipped-entry log is captured.
    private func metadataNameRemote(_ f: ProviderFixture) throws -> (any RemoteStore, LogLines) {
        try f.writeRemote("real.txt", Array("real\n".utf8))
        try f.harness.makeDirectory(".mamfs-provider/tmp")
        try f.harness.server?.giveToWorkers(f.remotePath(".mamfs-provider"))
        try f.writeRemote(".mamfs-provider/evil", Array("evil\n".utf8))
        try f.writeRemote(".mamfs-provider/tmp/x", Array("x\n".utf8))
        let lines = LogLines()
        return (try f.harness.store(log: { lines.append($0) }), lines)
    }

    /// What the provider itself keeps in `.mamfs-provider`: the database (with its WAL files),
    /// the lock and the tmp directory with session directories only.
    private func expectOnlyProviderFiles(_ f: ProviderFixture, sourceLocation: SourceLocation = #_sourceLocation) {
        let metadata = f.localPath(".mamfs-provider")
        let names = rawNames(metadata).map { String(decoding: $0, as: UTF8.self) }
        let own: Set<String> = ["provider.db", "provider.db-wal", "provider.db-shm", "sync.lock", "tmp"]
        #expect(names.allSatisfy(own.contains), "foreign entries in .mamfs-provider: \(names)", sourceLocation: sourceLocation)
        let tmp = rawNames(metadata + "/tmp").map { String(decoding: $0, as: UTF8.self) }
        #expect(tmp.allSatisfy { $0.hasPrefix("s-") }, "foreign entries in .mamfs-provider/tmp: \(tmp)", sourceLocation: sourceLocation)
        #expect(!f.exists(metadata + "/evil") && !f.exists(metadata + "/tmp/x"), sourceLocation: sourceLocation)
        #expect((try? ProviderDatabase(layout: ProviderLayout(root: f.localRoot), create: false).configuration()) != nil,
                "provider.db is not the provider's database any more", sourceLocation: sourceLocation)
    }

    @Test("replicated sync: a remote .mamfs-provider is skipped with a log line, never written into the local metadata directory")
    func replicatedRemoteMetadataName() throws {
        let f = try ProviderFixture()
        let (remote, lines) = try metadataNameRemote(f)
        try f.writeLocalProtected("mine.txt", Array("mine\n".utf8))
        let report = try f.replicated(remote: remote).syncOnce()
        #expect(report.errors.isEmpty && report.complete, "the skip became an item error: \(report.errors)")
        expectOnlyProviderFiles(f)
        #expect(try f.plaintext(f.localPath("real.txt")) == Array("real\n".utf8))
        #expect(lines.all.contains { $0.contains("skipped '.mamfs-provider'") }, "no log line names the skipped item: \(lines.all)")
        // The local metadata directory is never uploaded; the remote's own one is left as it was.
        #expect(rawNames(f.remotePath(".mamfs-provider")) == [Array("evil".utf8), Array("tmp".utf8)])
        #expect(rawNames(f.remotePath(".mamfs-provider/tmp")) == [Array("x".utf8)])
        #expect(try f.read(f.remotePath(".mamfs-provider/evil")) == Array("evil\n".utf8))
        #expect(f.exists(f.remotePath("mine.txt")), "the local file was not uploaded: \(report.errors)")
        // A second pass is clean too.
        let again = try f.replicated(remote: remote).syncOnce()
        #expect(again.errors.isEmpty, "\(again.errors)")
        expectOnlyProviderFiles(f)
    }

    @Test("non-replicated placeholders: a remote .mamfs-provider is skipped with a log line, no placeholder lands in the local metadata directory",
          arguments: RemoteKind.available)
    func nonReplicatedRemoteMetadataName(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        let (remote, lines) = try metadataNameRemote(f)
        let provider = try f.nonReplicated(remote: remote)
        let report = try provider.createPlaceholders()
        #expect(report.errors.isEmpty, "the skip became an item error: \(report.errors)")
        expectOnlyProviderFiles(f)
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("real.txt")) != nil)
        #expect(lines.all.contains { $0.contains("skipped '.mamfs-provider'") }, "no log line names the skipped item: \(lines.all)")
        _ = try provider.uploadPendingChanges()
        #expect(!f.exists(f.remotePath(".mamfs-provider/provider.db")), "the local metadata directory was uploaded")
    }

    @Test("both providers leave out a root item named .mamfs-provider from any remote store")
    func providersLeaveOutMetadataName() {
        func item(_ id: String, _ parent: ItemIdentifier, _ name: String, _ type: ItemType) -> RemoteItem {
            RemoteItem(identifier: ItemIdentifier(id), parentIdentifier: parent, filename: name, type: type, size: 0,
                       version: ItemVersion(contentVersion: id, metadataVersion: id))
        }
        let items = [
            item("m", .rootContainer, ".mamfs-provider", .directory),
            item("m/evil", ItemIdentifier("m"), "evil", .file),
            item("d", .rootContainer, "d", .directory),
            item("d/.mamfs-provider", ItemIdentifier("d"), ".mamfs-provider", .file),
        ]
        let paths = ProviderBinding.localPaths(of: items)
        #expect(paths[ItemIdentifier(rawValue: "m")] == nil && paths[ItemIdentifier(rawValue: "m/evil")] == nil)
        #expect(paths[ItemIdentifier(rawValue: "d/.mamfs-provider")] == "d/.mamfs-provider")
    }

    @Test("ItemIdentifier compares exact bytes: canonically equal names are different identifiers")
    func identifiersAreBytes() {
        #expect(ItemIdentifier(nfdName) != ItemIdentifier(nfcName))
        #expect(Set([ItemIdentifier(nfdName), ItemIdentifier(nfcName)]).count == 2)
        #expect(ItemIdentifier(nfcName) == ItemIdentifier(String(decoding: Array(nfcName.utf8), as: UTF8.self)))
    }

    @Test("replicated sync: a replica directory swapped for a symlink to outside while a file is fetched is not written through")
    func replicatedPlantedSymlink() throws {
        let f = try ProviderFixture()
        try f.writeRemote("d/first.txt", Array("one\n".utf8))
        _ = try f.replicated().syncOnce()
        #expect(try f.plaintext(f.localPath("d/first.txt")) == Array("one\n".utf8))
        try f.writeRemote("d/second.txt", Array("two\n".utf8))
        try f.writeRemote("d/first.txt", Array("one, changed\n".utf8))
        let before = byteSnapshot(f.outside)
        // Someone with access to the replica swaps the directory for a symlink to outside
        // after the pass looked at the replica, while the file is downloaded.
        let swapping = SwappingRemote(f.remote()) {
            try? FileManager.default.moveItem(atPath: f.localPath("d"), toPath: f.root + "/moved-away")
            _ = symlink(f.outside, f.localPath("d"))
        }
        let report = try f.replicated(remote: swapping).syncOnce()
        #expect(swapping.swapped, "the swap did not happen")
        #expect(byteSnapshot(f.outside) == before, "the sync followed the planted symlink: \(report.errors)")
    }

    @Test("non-replicated placeholders: a local directory replaced by a symlink to outside is not written through",
          arguments: RemoteKind.available)
    func nonReplicatedPlantedSymlink(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("d/first.txt", Array("one\n".utf8))
        let provider = try f.nonReplicated()
        try provider.createPlaceholders()
        try FileManager.default.removeItem(atPath: f.localPath("d"))
        guard symlink(f.outside, f.localPath("d")) == 0 else { throw MAMError.fromErrno("symlink") }
        try f.writeRemote("d/second.txt", Array("two\n".utf8))
        let before = byteSnapshot(f.outside)
        try provider.createPlaceholders()
        #expect(byteSnapshot(f.outside) == before, "a placeholder was made through the planted symlink")
        // Providing through the symlinked path is refused too.
        try f.write(f.outside + "/first.txt", [])
        let snapshot = byteSnapshot(f.outside)
        _ = try? provider.startProvidingItem(localPath: f.localPath("d/first.txt"))
        #expect(byteSnapshot(f.outside) == snapshot)
    }

    @Test("ConfinedDirectory never follows a symlink nor leaves the directory, with openat2 and with the descriptor walk",
          arguments: [true, false])
    func confinedResolution(useOpenat2: Bool) throws {
        let f = try ProviderFixture(policy: nil)
        try f.write(f.outside + "/secret", Array("outside".utf8))
        try f.write(f.localPath("d/inside"), Array("inside".utf8))
        #expect(symlink(f.outside, f.localPath("link")) == 0)
        #expect(symlink(f.outside + "/secret", f.localPath("d/filelink")) == 0)
        guard mkfifo(f.localPath("d/pipe"), 0o644) == 0 else { throw MAMError.fromErrno("mkfifo") }
        defer { releaseFIFO(f.localPath("d/pipe")) }
        let tree = try ConfinedDirectory(path: f.localRoot, useOpenat2: useOpenat2)
        func opened(_ relative: String, _ flags: Int32) -> Int32 {
            let fd = tree.open(relative, flags)
            let code = fd >= 0 ? 0 : errno
            if fd >= 0 { close(fd) }
            return code
        }
        #expect(opened("d/inside", O_RDONLY) == 0)
        #expect(opened("link/secret", O_RDONLY) == ELOOP, "a symlinked directory was crossed")
        #expect(opened("d/filelink", O_RDONLY) == ELOOP, "a symlink was followed")
        #expect(opened("d/filelink", mamfs_O_PATH) == ELOOP, "an O_PATH open of a symlink succeeded")
        #expect(opened("../outside/secret", O_RDONLY) == ENOENT)
        #expect(opened("/etc/passwd", O_RDONLY) == ENOENT)
        #expect(opened("link/new", O_WRONLY | O_CREAT) == ELOOP)
        #expect(!f.exists(f.outside + "/new"))
        // errno is read at once, before the expectation machinery can change it.
        let mkdirCode = tree.mkdir("link/made", 0o755) == -1 ? errno : 0
        let renameCode = tree.rename("d/inside", "link/moved") == -1 ? errno : 0
        let lstatCode = tree.lstat("link/secret") == nil ? errno : 0
        let fifo = tree.openExisting("d/pipe", O_RDONLY)
        let fifoCode = fifo == -1 ? errno : 0
        if fifo >= 0 { close(fifo) }
        #expect(mkdirCode == ELOOP)
        #expect(renameCode == ELOOP)
        #expect(lstatCode == ELOOP)
        #expect(fifoCode == EINVAL, "a FIFO was opened")
        #expect(tree.lstat("d/filelink").map { ($0.st_mode & S_IFMT) == S_IFLNK } == true)
        #expect(tree.names(in: "link") == nil)
        #expect(Set(tree.names(in: "d") ?? []) == ["inside", "filelink", "pipe"])
        #expect(try f.read(f.outside + "/secret") == Array("outside".utf8))
    }

    @Test("the temp area: what a process that is gone left is removed at the next start; a live process's session is kept")
    func temporaryAreaSweep() throws {
        let f = try ProviderFixture()
        let first = try f.nonReplicated()
        let live = try first.layout.makeTemporaryFile(name: "live")
        let tmp = first.layout.temporaryDirectory
        // A killed run: its session directory (nobody holds its lock) and a loose temp file.
        #expect(mkdir(tmp + "/s-999999-1", 0o700) == 0)
        try f.write(tmp + "/s-999999-1/.big.bin.mamfs-tmp-AbCdEf", Array("left behind".utf8))
        try f.write(tmp + "/.old.bin.mamfs-tmp-GhIjKl", Array("left behind".utf8))
        _ = try f.nonReplicated()
        #expect(!f.exists(tmp + "/s-999999-1"), "a dead session survived the next start")
        #expect(!f.exists(tmp + "/.old.bin.mamfs-tmp-GhIjKl"))
        #expect(f.exists(live.path), "the live session's temp file was removed")
    }

    @Test("a remote file that became a FIFO: reading it fails at once instead of blocking")
    func remoteFIFORead() throws {
        let f = try ProviderFixture()
        try f.writeRemote("a.txt", Array("alpha\n".utf8))
        let remote = f.remote()
        unlink(f.remotePath("a.txt"))
        guard mkfifo(f.remotePath("a.txt"), 0o644) == 0 else { throw MAMError.fromErrno("mkfifo") }
        defer { releaseFIFO(f.remotePath("a.txt")) }
        let destination = f.outside + "/download"
        try f.write(destination, [])
        var failed = false
        let inTime = finishes(within: 10) {
            do { _ = try remote.readContents(of: ItemIdentifier("a.txt"), into: URL(fileURLWithPath: destination)) } catch {
                failed = true
            }
        }
        #expect(inTime, "readContents blocked on a FIFO")
        #expect(!inTime || failed, "a FIFO was read as a file")
    }

    // Local remote only: a FIFO in the served directory is the server's business; over WebDAV
    // the client only ever sees HTTP replies.
    @Test("non-replicated: a placeholder whose remote file became a FIFO fails to materialize without blocking; other files still work")
    func nonReplicatedFIFO() throws {
        let f = try ProviderFixture()
        try f.writeRemote("a.txt", Array("alpha\n".utf8))
        try f.writeRemote("b.txt", Array("beta\n".utf8))
        guard mkfifo(f.remotePath("fifo"), 0o644) == 0 else { throw MAMError.fromErrno("mkfifo") }
        defer { releaseFIFO(f.remotePath("fifo")); releaseFIFO(f.remotePath("a.txt")) }
        let provider = try f.nonReplicated()
        #expect(finishes(within: 10) { _ = try? provider.createPlaceholders() }, "placeholders blocked on a FIFO")
        #expect(!f.exists(f.localPath("fifo")), "the FIFO appeared locally")
        unlink(f.remotePath("a.txt"))
        guard mkfifo(f.remotePath("a.txt"), 0o644) == 0 else { throw MAMError.fromErrno("mkfifo") }
        let a = f.localPath("a.txt")
        #expect(finishes(within: 10) { _ = try? provider.startProvidingItem(localPath: a) }, "materialize blocked on a FIFO")
        try provider.startProvidingItem(localPath: f.localPath("b.txt"))
        #expect(try f.plaintext(f.localPath("b.txt")) == Array("beta\n".utf8))
    }

    @Test("replicated sync: a FIFO in the remote is skipped without blocking, regular files arrive")
    func replicatedFIFO() throws {
        let f = try ProviderFixture()
        try f.writeRemote("a.txt", Array("alpha\n".utf8))
        guard mkfifo(f.remotePath("fifo"), 0o644) == 0 else { throw MAMError.fromErrno("mkfifo") }
        defer { releaseFIFO(f.remotePath("fifo")) }
        let provider = try f.replicated()
        #expect(finishes(within: 20) { _ = provider.syncOnce() }, "the sync blocked on a FIFO")
        #expect(!f.exists(f.localPath("fifo")))
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("alpha\n".utf8))
    }

    @Test("replicated sync: remote files that become FIFOs while the pass downloads are refused without blocking; the other file arrives")
    func replicatedFIFOSwap() throws {
        let f = try ProviderFixture()
        for name in ["a.txt", "b.txt", "keep.txt"] { try f.writeRemote(name, Array("\(name)\n".utf8)) }
        let swapping = SwappingRemote(f.remote()) {
            for name in ["a.txt", "b.txt"] {
                unlink(f.remotePath(name))
                _ = mkfifo(f.remotePath(name), 0o644)
            }
        }
        defer { releaseFIFO(f.remotePath("a.txt")); releaseFIFO(f.remotePath("b.txt")) }
        let provider = try f.replicated(remote: swapping)
        var report = SyncReport()
        #expect(finishes(within: 20) { report = provider.syncOnce() }, "the sync blocked on a FIFO")
        #expect(swapping.swapped)
        #expect(try f.plaintext(f.localPath("keep.txt")) == Array("keep.txt\n".utf8), "\(report.errors)")
        var st = stat()
        for name in ["a.txt", "b.txt"] {
            #expect(lstat(f.localPath(name), &st) != 0 || (st.st_mode & S_IFMT) == S_IFREG, "\(name) appeared as a special file")
        }
    }

    @Test("upload reads a local file that became a FIFO without blocking")
    func localFIFOUpload() throws {
        let f = try ProviderFixture()
        let provider = try f.nonReplicated()
        try provider.createPlaceholders()
        guard mkfifo(f.localPath("pipe"), 0o644) == 0 else { throw MAMError.fromErrno("mkfifo") }
        defer { releaseFIFO(f.localPath("pipe")) }
        let layout = provider.layout
        let context = f.context
        #expect(finishes(within: 10) {
            _ = try? ProviderRules.plainCopyForUpload(localPath: f.localPath("pipe"), receiver: ProviderFixture.managedId,
                                                      layout: layout, context: context)
        }, "the upload copy blocked on a local FIFO")
    }
}

/// A remote that runs `swap` once, when the first file read starts (a local change racing
/// with the sync pass).
final class SwappingRemote: HookedRemote, @unchecked Sendable {
    private let swap: () -> Void
    private(set) var swapped = false

    init(_ inner: LocalDirectoryRemote, swap: @escaping () -> Void) {
        self.swap = swap
        super.init(inner)
    }

    override func beforeRead(_ count: Int) {
        if !swapped { swapped = true; swap() }
    }
}

/// Log lines collected from a store's skipped-entry log.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
