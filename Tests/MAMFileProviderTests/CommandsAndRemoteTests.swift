import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

@Suite("Provider commands")
struct ProviderCommandsTests {
    @Test("sync remembers remote and account; status is Codable; evict refuses replicated roots; import goes through the replica")
    func commandRoundTrip() throws {
        let f = try ProviderFixture()
        try f.writeRemote("a.txt", Array("alpha".utf8))
        #expect(throws: MAMError.self) { try ProviderCommands.sync(localPath: f.localRoot, remote: nil, context: f.context) }
        var lines: [Int] = []
        let first = try ProviderCommands.sync(localPath: f.localRoot, remote: f.remoteRoot, context: f.context,
                                              account: ProviderFixture.managedUPN) { lines.append($0.done) }
        #expect(first.isClean && first.fetched == 1 && first.exitCode == .ok)
        #expect(!lines.isEmpty)
        try f.writeRemote("b.txt", Array("beta".utf8))
        let second = try ProviderCommands.sync(localPath: f.localRoot, remote: nil, context: f.context)
        #expect(second.fetched == 1)

        let status = try ProviderCommands.status(path: f.localPath("b.txt"))
        #expect(status.kind == .replicated && status.materialized && !status.pendingUpload)
        #expect(status.itemIdentifier == ItemIdentifier("b.txt") && status.size == 4 && status.encrypted)
        #expect(status.owner == ProviderFixture.managedId)
        let json = try JSONEncoder().encode(status)
        #expect(try JSONDecoder().decode(ProviderItemStatus.self, from: json) == status)
        #expect(String(decoding: json, as: UTF8.self).contains("\"itemIdentifier\":\"b.txt\""))

        #expect { try ProviderCommands.evict(path: f.localPath("a.txt")) } throws: { ($0 as? MAMError)?.exitCode == .usage }
        #expect { try ProviderCommands.status(path: f.outside) } throws: { ($0 as? MAMError)?.exitCode == .usage }

        let source = try f.write(f.outside + "/in.txt", Array("imported".utf8))
        try f.context.files.encryptFile(path: source, forAccountId: ProviderFixture.managedId)
        let item = try ProviderCommands.importFile(source, toDirectory: f.localRoot, context: f.context)
        #expect(item.filename == "in.txt" && item.ownerAccountId == ProviderFixture.managedId)
        #expect(try f.read(f.remotePath("in.txt")) == Array("imported".utf8))
        #expect(try f.plaintext(f.localPath("in.txt")) == Array("imported".utf8))
        f.expectRemotePlain()
    }
}

@Suite("LocalDirectoryRemote")
struct LocalDirectoryRemoteTests {
    @Test("versions: content changes on write, survives a rename; modify and delete check the base version")
    func versionsAndConflicts() throws {
        let f = try ProviderFixture(policy: nil)
        let remote = f.remote()
        let plain = try f.write(f.outside + "/p", Array("one".utf8))
        let created = try remote.create(parent: .rootContainer, name: "x.txt", contents: .file(URL(fileURLWithPath: plain)))
        #expect(created.identifier == ItemIdentifier("x.txt") && created.size == 3)
        #expect(throws: RemoteError.self) {
            try remote.create(parent: .rootContainer, name: "x.txt", contents: .file(URL(fileURLWithPath: plain)))
        }
        let moved = try remote.move(created.identifier, toParent: .rootContainer, newName: "y.txt")
        #expect(moved.identifier == ItemIdentifier("y.txt"))
        #expect(moved.version.contentVersion == created.version.contentVersion)
        #expect(moved.version.metadataVersion != created.version.metadataVersion)
        try f.write(plain, Array("two!".utf8))
        let modified = try remote.modify(moved.identifier, baseVersion: moved.version.contentVersion, contentsURL: URL(fileURLWithPath: plain))
        #expect(modified.version.contentVersion != moved.version.contentVersion)
        #expect(throws: RemoteError.conflict(moved.identifier, current: modified.version)) {
            try remote.modify(moved.identifier, baseVersion: moved.version.contentVersion, contentsURL: URL(fileURLWithPath: plain))
        }
        #expect(throws: RemoteError.conflict(moved.identifier, current: modified.version)) {
            try remote.delete(moved.identifier, baseVersion: moved.version.contentVersion)
        }
        try remote.delete(moved.identifier, baseVersion: modified.version.contentVersion)
        #expect(throws: RemoteError.notFound(moved.identifier)) { try remote.item(moved.identifier) }
        #expect(throws: RemoteError.notFound(ItemIdentifier("../etc"))) { try remote.item(ItemIdentifier("../etc")) }
        #expect(f.leftoverTemporaryFiles(under: f.remoteRoot).isEmpty)
        #expect(throws: RemoteError.readOnly(f.remoteRoot)) {
            try f.remote(readOnly: true).create(parent: .rootContainer, name: "z", contents: .directory)
        }
        #expect(rename(f.remoteRoot, f.remoteRoot + ".gone") == 0)
        #expect { try remote.enumerate(container: .rootContainer) } throws: { error in
            guard case RemoteError.unreachable = error else { return false }
            return true
        }
        #expect(rename(f.remoteRoot + ".gone", f.remoteRoot) == 0)
    }

    @Test("conflict names: 'name (conflict HOST YYYY-MM-DD HHMMSS).ext', numbered when taken")
    func conflictNames() {
        let date = Date(timeIntervalSince1970: 1_700_000_000)   // 2023-11-14 22:13:20 UTC
        #expect(ConflictName.make(for: "report.docx", date: date, host: "ws1") { _ in false } == "report (conflict ws1 2023-11-14 221320).docx")
        #expect(ConflictName.make(for: "Makefile", date: date, host: "ws1") { _ in false } == "Makefile (conflict ws1 2023-11-14 221320)")
        #expect(ConflictName.make(for: "a.txt", date: date, host: "ws1") { $0 == "a (conflict ws1 2023-11-14 221320).txt" }
                == "a (conflict ws1 2023-11-14 221320 2).txt")
    }

    @Test("a conflict name is at most 255 bytes: a long stem is cut at a character boundary, an extension too long to keep goes with it")
    func longConflictNames() {
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let tag = " (conflict ws1 2023-11-14 221320)"
        let ascii = String(repeating: "L", count: 245) + ".txt"
        let made = ConflictName.make(for: ascii, date: date, host: "ws1") { _ in false }
        #expect(made.utf8.count <= 255 && made == String(repeating: "L", count: 255 - tag.utf8.count - 4) + tag + ".txt", "\(made)")
        let accented = String(repeating: "é", count: 120) + ".odt"
        let cut = ConflictName.make(for: accented, date: date, host: "ws1") { _ in false }
        #expect(cut.utf8.count <= 255 && cut.hasSuffix(tag + ".odt") && cut.hasPrefix("éé"), "\(cut)")
        #expect(cut.dropLast((tag + ".odt").count).allSatisfy { $0 == "é" }, "no character split: \(cut)")
        let longExtension = "a." + String(repeating: "x", count: 240)
        let bare = ConflictName.make(for: longExtension, date: date, host: "ws1") { _ in false }
        #expect(bare.utf8.count <= 255 && bare.hasPrefix("a.xxx") && bare.hasSuffix(tag), "\(bare)")
        let numbered = ConflictName.make(for: ascii, date: date, host: "ws1") { $0.hasSuffix(tag + ".txt") }
        #expect(numbered.utf8.count <= 255 && numbered.hasSuffix(" (conflict ws1 2023-11-14 221320 2).txt"), "\(numbered)")
    }
}

/// A full local-directory remote says so, as a full WebDAV server (HTTP 507) does.
@Suite("Local-directory remote: a full disk")
struct LocalRemoteFullDiskTests {
    @Test("a full remote directory is .insufficientStorage naming the item (exit 74), not an I/O error; no temp file is left")
    func fullRemoteDirectory() throws {
        let scratch = try TempDirectory(prefix: "mamfs-full-remote")
        let root = scratch.file("remote")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let mounted = try shell("mount -t tmpfs -o size=1m,mode=0755 mamfs-full-remote \(shellQuote(root)) 2>&1")
        try #require(mounted.status == 0, "tmpfs: \(mounted.out)")
        defer { _ = try? shell("umount \(shellQuote(root)) || umount -l \(shellQuote(root))") }
        let big = scratch.file("big")
        try Data(repeating: 0x61, count: 3 << 20).write(to: URL(fileURLWithPath: big))
        let store = LocalDirectoryRemote(root: root)
        #expect(throws: RemoteError.insufficientStorage(ItemIdentifier("big.bin"))) {
            try store.create(parent: .rootContainer, name: "big.bin", contents: .file(URL(fileURLWithPath: big)))
        }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: root)) == [], "nothing left behind")
    }
}

/// A conflict on a name near NAME_MAX: the conflict copy's name is cut to fit, so the pass
/// keeps both instead of failing on every run. (On the local-directory store: the WebDAV
/// fixture's server writes through a temp name longer than such a name.)
@Suite("Providers: conflicts on long names")
struct LongNameConflictTests {
    static let name = String(repeating: "L", count: 240) + ".txt"

    @Test("replicated: both kept, the local edit under a conflict name of at most 255 bytes, uploaded")
    func replicated() throws {
        let f = try ProviderFixture()
        try f.writeRemote(Self.name, Array("base".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        try f.writeRemote(Self.name, Array("remote edit".utf8))
        try f.writeLocalProtected(Self.name, Array("local edit".utf8))
        let report = provider.syncOnce()
        #expect(report.isClean && report.conflicts == 1, "\(report)")
        let copies = f.files(under: f.localRoot).filter { $0 != Self.name }
        #expect(copies.count == 1 && copies.allSatisfy { $0.utf8.count <= 255 && $0.contains(" (conflict ") }, "\(copies)")
        let copy = try #require(copies.first)
        #expect(try f.plaintext(f.localPath(copy)) == Array("local edit".utf8))
        #expect(try f.read(f.remotePath(copy)) == Array("local edit".utf8))
        #expect(try f.plaintext(f.localPath(Self.name)) == Array("remote edit".utf8))
        #expect(provider.syncOnce().isClean)
    }

    @Test("non-replicated: itemChanged keeps both, the conflict copy uploaded under a name of at most 255 bytes")
    func nonReplicated() throws {
        let f = try ProviderFixture()
        try f.writeRemote(Self.name, Array("base".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath(Self.name))
        try f.writeRemote(Self.name, Array("remote edit".utf8))
        try f.writeLocalProtected(Self.name, Array("local edit".utf8))
        let item = try #require(try provider.itemChanged(localPath: f.localPath(Self.name)))
        #expect(item.filename.utf8.count <= 255 && item.filename.contains(" (conflict "), "\(item.filename)")
        #expect(try f.read(f.remotePath(item.filename)) == Array("local edit".utf8))
        #expect(try f.read(f.remotePath(Self.name)) == Array("remote edit".utf8))
    }
}
