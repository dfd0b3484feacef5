import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

@Suite("Replicated provider")
struct ReplicatedProviderTests {
    @Test("remote changes are picked up: create, modify, delete, rename (a rename moves the local file, no re-download)", arguments: RemoteKind.available)
    func remoteChangesPickedUp(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("keep.txt", Array("keep".utf8))
        try f.writeRemote("change.txt", Array("v1".utf8))
        try f.writeRemote("gone.txt", Array("bye".utf8))
        try f.writeRemote("old-name.txt", Array("renamed file".utf8))
        try f.writeRemote("dir/inner.txt", Array("inner".utf8))
        let provider = try f.replicated()
        var report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        #expect(report.fetched == 6)
        let renamedInode = f.inode(f.localPath("old-name.txt"))
        let innerInode = f.inode(f.localPath("dir/inner.txt"))

        try f.writeRemote("new.txt", Array("created remotely".utf8))
        try f.writeRemote("change.txt", Array("version two".utf8))
        #expect(unlink(f.remotePath("gone.txt")) == 0)
        #expect(rename(f.remotePath("old-name.txt"), f.remotePath("new-name.txt")) == 0)
        #expect(rename(f.remotePath("dir"), f.remotePath("moved-dir")) == 0)
        report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        #expect(report.fetched == 2)
        #expect(report.deletedLocally == 1)
        #expect(report.movedLocally == 2)
        #expect(try f.plaintext(f.localPath("new.txt")) == Array("created remotely".utf8))
        #expect(try f.plaintext(f.localPath("change.txt")) == Array("version two".utf8))
        #expect(!f.exists(f.localPath("gone.txt")))
        #expect(!f.exists(f.localPath("old-name.txt")))
        #expect(f.inode(f.localPath("new-name.txt")) == renamedInode, "renamed, not fetched again")
        #expect(f.inode(f.localPath("moved-dir/inner.txt")) == innerInode)
        #expect(try f.plaintext(f.localPath("keep.txt")) == Array("keep".utf8))
        #expect(provider.syncOnce() == { var r = SyncReport(); r.anchor = 3; return r }(), "a third pass has nothing to do")
        f.expectRemotePlain()
    }

    @Test("local changes are pushed: create, modify, delete, rename (a rename is a move on the remote, not a re-upload)", arguments: RemoteKind.available)
    func localChangesPushed(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("edit.txt", Array("v1".utf8))
        try f.writeRemote("delete.txt", Array("delete me".utf8))
        try f.writeRemote("rename.txt", Array("rename me".utf8))
        try f.writeRemote("folder/a.txt", Array("a".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        let remoteRenameInode = try #require(f.inode(f.remotePath("rename.txt")))
        let remoteFolderFileInode = try #require(f.inode(f.remotePath("folder/a.txt")))

        try f.writeLocalProtected("created.txt", Array("made locally".utf8))
        try f.writeLocalProtected("sub/deep.txt", Array("deep".utf8))
        try f.writeLocalProtected("edit.txt", Array("version two, longer".utf8))
        #expect(unlink(f.localPath("delete.txt")) == 0)
        #expect(rename(f.localPath("rename.txt"), f.localPath("renamed.txt")) == 0)
        #expect(rename(f.localPath("folder"), f.localPath("folder2")) == 0)
        let report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        #expect(report.created == 3, "created.txt, sub, sub/deep.txt")
        #expect(report.modified == 1)
        #expect(report.deletedRemotely == 1)
        #expect(report.movedRemotely == 2)
        #expect(try f.read(f.remotePath("created.txt")) == Array("made locally".utf8))
        #expect(try f.read(f.remotePath("sub/deep.txt")) == Array("deep".utf8))
        #expect(try f.read(f.remotePath("edit.txt")) == Array("version two, longer".utf8))
        #expect(!f.exists(f.remotePath("delete.txt")))
        #expect(!f.exists(f.remotePath("rename.txt")))
        #expect(f.inode(f.remotePath("renamed.txt")) == remoteRenameInode, "moved on the remote, not uploaded again")
        #expect(f.inode(f.remotePath("folder2/a.txt")) == remoteFolderFileInode)
        let next = provider.syncOnce()
        #expect(next.fetched == 0 && next.created == 0 && next.modified == 0 && next.isClean, "\(next)")
        f.expectRemotePlain()
    }

    @Test("conflicts keep both: the local version under 'name (conflict HOST DATE).ext', uploaded as a new item", arguments: RemoteKind.available)
    func conflictCopies(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("notes.txt", Array("base".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        try f.writeRemote("notes.txt", Array("remote edit".utf8))
        try f.writeLocalProtected("notes.txt", Array("local edit".utf8))
        // Both sides create the same new name too.
        try f.writeRemote("both.txt", Array("remote new".utf8))
        try f.writeLocalProtected("both.txt", Array("local new".utf8))
        let report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        #expect(report.conflicts == 2)
        #expect(try f.plaintext(f.localPath("notes.txt")) == Array("remote edit".utf8))
        #expect(try f.read(f.remotePath("notes.txt")) == Array("remote edit".utf8))
        #expect(try f.plaintext(f.localPath("both.txt")) == Array("remote new".utf8))
        let host = ConflictName.hostName()
        for (stem, expected) in [("notes", "local edit"), ("both", "local new")] {
            let copies = f.files(under: f.localRoot).filter { $0.hasPrefix("\(stem) (conflict \(host) ") && $0.hasSuffix(").txt") }
            #expect(copies.count == 1, "\(f.files(under: f.localRoot))")
            let copy = try #require(copies.first)
            #expect(try f.plaintext(f.localPath(copy)) == Array(expected.utf8))
            #expect(try f.read(f.remotePath(copy)) == Array(expected.utf8), "the conflict copy is uploaded")
        }
        #expect(provider.syncOnce().isClean)
        f.expectRemotePlain()
    }

    @Test("a remote that vanishes mid-sync (directory renamed away, server killed): error reported, local data untouched, the next pass after it returns works",
          arguments: RemoteKind.available)
    func remoteVanishesMidSync(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        for i in 0..<10 { try f.writeRemote("f\(i).txt", randomBytes(3000, seed: UInt64(i))) }
        let plain = try f.store()
        let first = try f.replicated(remote: plain)
        #expect(first.syncOnce().isClean)
        let localBefore = try Dictionary(uniqueKeysWithValues: f.files(under: f.localRoot).map { ($0, try f.read(f.localPath($0))) })

        // New and changed remote files; the remote vanishes after two downloads.
        for i in 0..<5 { try f.writeRemote("f\(i).txt", randomBytes(4000, seed: UInt64(100 + i))) }
        for i in 0..<5 { try f.writeRemote("new\(i).txt", randomBytes(100, seed: UInt64(200 + i))) }
        try f.writeLocalProtected("local-only.txt", Array("not uploaded yet".utf8))
        let vanishing = VanishingRemote(plain, harness: f.harness, vanishAfterReads: 3)
        let provider = try f.replicated(remote: vanishing)
        let report = provider.syncOnce()
        #expect(vanishing.vanished)
        #expect(!report.complete)
        #expect(report.errors.contains { $0.errno == EHOSTUNREACH }, "\(report.errors)")
        #expect(report.exitCode == .tempFail)
        #expect(report.deletedLocally == 0)
        for (relative, bytes) in localBefore {
            // Each file is either as it was or (fetched before the remote vanished) the new version.
            let index = UInt64(relative.dropFirst().prefix(while: \.isNumber)) ?? 99
            if index >= 5 {
                #expect(try f.read(f.localPath(relative)) == bytes, "\(relative)")
            } else {
                let now = try f.plaintext(f.localPath(relative))
                #expect(now == randomBytes(3000, seed: index) || now == randomBytes(4000, seed: 100 + index), "\(relative)")
            }
        }
        #expect(f.exists(f.localPath("local-only.txt")))
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)

        // Still gone: the next pass changes nothing locally either.
        let filesWhileGone = f.files(under: f.localRoot)
        let whileGone = provider.syncOnce()
        #expect(!whileGone.complete && whileGone.deletedLocally == 0 && whileGone.fetched == 0)
        #expect(f.files(under: f.localRoot) == filesWhileGone)

        try vanishing.restore()
        let after = provider.syncOnce()
        #expect(after.isClean, "\(after.errors)")
        for i in 0..<5 {
            #expect(try f.plaintext(f.localPath("f\(i).txt")) == randomBytes(4000, seed: UInt64(100 + i)))
            #expect(try f.plaintext(f.localPath("new\(i).txt")) == randomBytes(100, seed: UInt64(200 + i)))
        }
        #expect(try f.read(f.remotePath("local-only.txt")) == Array("not uploaded yet".utf8))
        f.expectRemotePlain()
    }

    @Test("a remote unmounted before the pass (another volume in its place; for WebDAV the collection gone, which Apache answers with 405) is refused, nothing is deleted locally",
          arguments: RemoteKind.available)
    func replacedRemoteRefused(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("a.txt", Array("a".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        #expect(rename(f.remoteRoot, f.remoteRoot + ".unmounted") == 0)
        // The empty mount point; a WebDAV server has no volume identity to compare, so an empty
        // collection in place of the old one could not be told from one emptied by its users:
        // there the collection is just gone.
        if remote == .local { #expect(mkdir(f.remoteRoot, 0o755) == 0) }
        let report = provider.syncOnce()
        #expect(!report.complete)
        #expect(report.errors.first?.errno == EHOSTUNREACH, "\(report.errors)")
        #expect(report.exitCode == .tempFail)
        #expect(report.deletedLocally == 0)
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("a".utf8))
        if remote == .local { #expect(rmdir(f.remoteRoot) == 0) }
        #expect(rename(f.remoteRoot + ".unmounted", f.remoteRoot) == 0)
        #expect(provider.syncOnce().isClean)
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("a".utf8))
        f.expectRemotePlain()
    }

    @Test("a WebDAV collection replaced by an empty one is refused (nothing deleted locally); provider reattach uploads the local copies to it",
          .enabled(if: RemoteKind.available.contains(.webdav), "needs apache2"))
    func emptiedWebDAVCollectionRefused() throws {
        let f = try ProviderFixture(remoteKind: .webdav)
        try f.writeRemote("a.txt", Array("alpha".utf8))
        try f.writeRemote("d/b.txt", Array("beta".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        #expect(rename(f.remoteRoot, f.remoteRoot + ".old") == 0)
        // An empty collection in its place, which the server's workers may write to.
        #expect(mkdir(f.remoteRoot, 0o755) == 0)
        #expect(chown(f.remoteRoot, ApacheDAVServer.workerID.uid, ApacheDAVServer.workerID.gid) == 0)
        let report = provider.syncOnce()
        #expect(!report.complete)
        #expect(report.errors.first?.errno == EHOSTUNREACH, "\(report.errors)")
        #expect(report.exitCode == .tempFail)
        #expect(report.deletedLocally == 0)
        #expect(report.errors.first?.message.contains("provider reattach") == true, "\(report.errors)")
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("alpha".utf8))
        #expect(try f.plaintext(f.localPath("d/b.txt")) == Array("beta".utf8))
        // A second pass refuses the same way (nothing was recorded as deleted).
        #expect(provider.syncOnce().deletedLocally == 0)
        _ = try provider.reattach()
        let after = provider.syncOnce()
        #expect(after.isClean, "\(after.errors)")
        #expect(try f.read(f.remotePath("a.txt")) == Array("alpha".utf8))
        #expect(try f.read(f.remotePath("d/b.txt")) == Array("beta".utf8))
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("alpha".utf8))
        f.expectRemotePlain()
    }

    @Test("a read-only remote (a read-only store, a WebDAV server refusing writes with 403): clear error, local changes kept and pushed once it is writable",
          arguments: RemoteKind.available)
    func readOnlyRemote(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("a.txt", Array("a".utf8))
        try f.harness.setReadOnly(true)
        #expect(try f.replicated(remote: f.harness.store(readOnly: true)).syncOnce().isClean, "reading works")
        try f.writeLocalProtected("a.txt", Array("changed".utf8))
        let report = try f.replicated(remote: f.harness.store(readOnly: true)).syncOnce()
        // The server's refusal is an HTTP 403: access refused (EACCES), the local store's EROFS.
        let refusal = remote == .webdav ? EACCES : EROFS
        #expect(report.errors.contains { $0.path == "a.txt" && $0.errno == refusal }, "\(report.errors)")
        #expect(report.exitCode == (remote == .webdav ? .noPerm : .ioErr), "\(report.exitCode)")
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("changed".utf8))
        #expect(try f.read(f.remotePath("a.txt")) == Array("a".utf8))
        try f.harness.setReadOnly(false)
        let retry = try f.replicated().syncOnce()
        #expect(retry.isClean && retry.modified == 1, "\(retry)")
        #expect(try f.read(f.remotePath("a.txt")) == Array("changed".utf8))
        f.expectRemotePlain()
    }

    @Test("after a selective wipe the replica does not sync, so the removed files are not deleted from the remote",
          arguments: RemoteKind.available)
    func wipedAccountDoesNotPropagateDeletes(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("work.txt", Array("corporate".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        try f.context.enrollment.wipe(ProviderFixture.managedId, roots: [])
        #expect(!f.exists(f.localPath("work.txt")), "wipe found the replica through its known root")
        let report = provider.syncOnce()
        #expect(!report.complete)
        #expect(try f.read(f.remotePath("work.txt")) == Array("corporate".utf8))
        f.expectRemotePlain()
    }

    @Test("a local rename made while a pass reads the replica (through renamingLocally, as the mount renames) is pushed as a move: the remote file keeps its inode, nothing is deleted remotely or uploaded anew",
          arguments: RemoteKind.available)
    func renameDuringScanIsAMove(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        // Many directories, so a pass's read of the local tree takes a while (fewer on WebDAV,
        // where each directory is a request and a pass takes longer anyway).
        for i in 0..<(remote == .webdav ? 60 : 300) { try f.writeRemote("fill\(i)/x.txt", [UInt8(i & 0xff)]) }
        try f.writeRemote("a/moving.txt", Array("moving".utf8))
        try f.writeRemote("b/keep.txt", Array("keep".utf8))
        let provider = try f.replicated()
        let first = provider.syncOnce()
        #expect(first.isClean, "\(first.errors)")
        let remoteInode = try #require(f.inode(f.remotePath("a/moving.txt")))

        let renamer = LocalRenamer(provider: provider, paths: [f.localPath("a/moving.txt"), f.localPath("b/moving.txt")])
        var deletedRemotely = 0
        var created = 0
        for _ in 0..<20 {
            let report = provider.syncOnce()
            deletedRemotely += report.deletedRemotely
            created += report.created
        }
        let renames = renamer.stop()
        let last = provider.syncOnce()
        deletedRemotely += last.deletedRemotely
        created += last.created
        #expect(renames > 20, "the renames ran beside the passes")
        #expect(deletedRemotely == 0 && created == 0, "deleted \(deletedRemotely), created \(created)")
        let final = renamer.current.hasPrefix(f.localPath("a/")) ? "a/moving.txt" : "b/moving.txt"
        let other = final == "a/moving.txt" ? "b/moving.txt" : "a/moving.txt"
        #expect(f.inode(f.remotePath(final)) == remoteInode, "moved on the remote, same inode")
        #expect(f.inode(f.remotePath(other)) == nil)
        #expect(try f.read(f.remotePath(final)) == Array("moving".utf8))
    }
}

/// Renames one local file back and forth between `paths` on its own thread, each rename
/// through `ReplicatedProvider.renamingLocally`, until `stop()`.
private final class LocalRenamer: @unchecked Sendable {
    private let lock = NSLock()
    private var stopping = false
    private var count = 0
    private var at = 0
    private let paths: [String]
    private let done = DispatchSemaphore(value: 0)

    init(provider: ReplicatedProvider, paths: [String]) {
        self.paths = paths
        Thread.detachNewThread { [self] in
            while !lock.withLock({ stopping }) {
                let from = lock.withLock { at }
                let renamed = provider.renamingLocally { rename(paths[from], paths[1 - from]) == 0 }
                if renamed { lock.withLock { at = 1 - from; count += 1 } }
            }
            done.signal()
        }
    }

    /// The path the file has now.
    var current: String { lock.withLock { paths[at] } }

    /// Stops the renames; returns how many were made.
    func stop() -> Int {
        lock.withLock { stopping = true }
        done.wait()
        return lock.withLock { count }
    }
}
