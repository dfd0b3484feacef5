import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

@Suite("Non-replicated provider")
struct NonReplicatedProviderTests {
    @Test("every remote item appears as a placeholder with the right name, type and size", arguments: RemoteKind.available)
    func placeholders(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("a.bin", randomBytes(12_345))
        try f.writeRemote("dir/b.txt", Array("bee".utf8))
        // WebDAV has no symbolic links (Apache would serve one as the file it points to).
        if remote == .local { #expect(symlink("a.bin", f.remotePath("link")) == 0) }
        let provider = try f.nonReplicated()
        let report = try provider.createPlaceholders()
        #expect(report.isClean && report.placeholders == 2, "\(report)")
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("a.bin")) == PlaceholderInfo(identifier: ItemIdentifier("a.bin"), size: 12_345))
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("dir/b.txt"))?.size == 3)
        #expect(try f.read(f.localPath("a.bin")).isEmpty, "no contents before first open")
        if remote == .local { #expect(FileSystem.readLink(f.localPath("link")) == "a.bin") }
        #expect(f.files(under: f.localRoot) == ["a.bin", "dir/b.txt"])
        let status = try ProviderCommands.status(path: f.localPath("a.bin"))
        #expect(!status.materialized && status.size == 12_345 && status.kind == .nonReplicated)
        #expect(status.itemIdentifier == ItemIdentifier("a.bin"))
        f.expectRemotePlain()
    }

    @Test("a WebDAV collection replaced by an empty one is refused by the placeholder refresh: no placeholder is removed",
          .enabled(if: RemoteKind.available.contains(.webdav), "needs apache2"))
    func emptiedWebDAVCollectionRefused() throws {
        let f = try ProviderFixture(remoteKind: .webdav)
        try f.writeRemote("a.bin", randomBytes(1_000))
        try f.writeRemote("dir/b.txt", Array("bee".utf8))
        let provider = try f.nonReplicated()
        #expect(try provider.createPlaceholders().isClean)
        #expect(rename(f.remoteRoot, f.remoteRoot + ".old") == 0)
        #expect(mkdir(f.remoteRoot, 0o755) == 0)
        #expect(chown(f.remoteRoot, ApacheDAVServer.workerID.uid, ApacheDAVServer.workerID.gid) == 0)
        let report = try provider.createPlaceholders()
        #expect(!report.complete)
        #expect(report.errors.first?.errno == EHOSTUNREACH, "\(report.errors)")
        #expect(report.errors.first?.message.contains("provider reattach") == true, "\(report.errors)")
        #expect(f.files(under: f.localRoot) == ["a.bin", "dir/b.txt"])
        // The old collection back: the refresh goes on as before.
        #expect(rmdir(f.remoteRoot) == 0)
        #expect(rename(f.remoteRoot + ".old", f.remoteRoot) == 0)
        #expect(try provider.createPlaceholders().isClean)
        #expect(f.files(under: f.localRoot) == ["a.bin", "dir/b.txt"])
        f.expectRemotePlain()
    }

    @Test("remote changes are picked up by the placeholder refresh: create, modify, delete, rename", arguments: RemoteKind.available)
    func remoteChangesPickedUp(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("change.txt", Array("v1".utf8))
        try f.writeRemote("gone.txt", Array("bye".utf8))
        try f.writeRemote("old.txt", Array("renamed".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath("change.txt"))

        try f.writeRemote("new.txt", Array("new one".utf8))
        try f.writeRemote("change.txt", Array("version two".utf8))
        #expect(unlink(f.remotePath("gone.txt")) == 0)
        #expect(rename(f.remotePath("old.txt"), f.remotePath("renamed.txt")) == 0)
        let report = try provider.createPlaceholders()
        #expect(report.isClean)
        #expect(report.deletedLocally == 1 && report.movedLocally == 1, "the rename is followed, not deleted and made again")
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("new.txt"))?.size == 7)
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("change.txt"))?.size == 11, "stale copy dropped")
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("renamed.txt")) != nil)
        #expect(!f.exists(f.localPath("gone.txt")) && !f.exists(f.localPath("old.txt")))
        try provider.startProvidingItem(localPath: f.localPath("change.txt"))
        #expect(try f.plaintext(f.localPath("change.txt")) == Array("version two".utf8))
        f.expectRemotePlain()
    }

    @Test("local changes are pushed: create and modify (itemChanged), rename and move (itemMoved, no re-upload), delete (deleteItem)", arguments: RemoteKind.available)
    func localChangesPushed(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("doc.txt", Array("v1".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath("doc.txt"))
        try f.writeLocalProtected("doc.txt", Array("edited through the mount".utf8))
        #expect(NonReplicatedProvider.hasPendingChanges(localPath: f.localPath("doc.txt")))
        let item = try #require(try provider.itemChanged(localPath: f.localPath("doc.txt")))
        #expect(item.ownerAccountId == ProviderFixture.managedId)
        #expect(try f.read(f.remotePath("doc.txt")) == Array("edited through the mount".utf8))
        #expect(!NonReplicatedProvider.hasPendingChanges(localPath: f.localPath("doc.txt")))
        #expect(try provider.itemChanged(localPath: f.localPath("doc.txt")) == nil, "nothing new to upload")

        try f.writeLocalProtected("folder/created.txt", Array("created in the mount".utf8))
        let created = try #require(try provider.itemChanged(localPath: f.localPath("folder/created.txt")))
        #expect(created.itemIdentifier == ItemIdentifier("folder/created.txt"))
        #expect(try f.read(f.remotePath("folder/created.txt")) == Array("created in the mount".utf8))

        // Rename (metadata only: the remote inode stays), directory move (children re-keyed), delete.
        let remoteInode = f.inode(f.remotePath("doc.txt"))
        #expect(rename(f.localPath("doc.txt"), f.localPath("renamed.txt")) == 0)
        let moved = try provider.itemMoved(localPath: f.localPath("renamed.txt"))
        #expect(moved.itemIdentifier == ItemIdentifier("doc.txt"), "the stable identifier survives the rename")
        #expect(LocalItemAttributes.read(path: f.localPath("renamed.txt"))?.identifier == ItemIdentifier("renamed.txt"), "the store's identifier follows it")
        #expect(f.inode(f.remotePath("renamed.txt")) == remoteInode)
        #expect(!f.exists(f.remotePath("doc.txt")))
        #expect(rename(f.localPath("folder"), f.localPath("folder2")) == 0)
        try provider.itemMoved(localPath: f.localPath("folder2"))
        #expect(LocalItemAttributes.read(path: f.localPath("folder2/created.txt"))?.identifier == ItemIdentifier("folder2/created.txt"))
        let attributes = try #require(LocalItemAttributes.read(path: f.localPath("renamed.txt")))
        #expect(unlink(f.localPath("renamed.txt")) == 0)
        try provider.deleteItem(withIdentifier: attributes.identifier, baseVersion: attributes.contentVersion)
        #expect(!f.exists(f.remotePath("renamed.txt")))
        #expect(f.files(under: f.remoteRoot) == ["folder2/created.txt"])
        f.expectRemotePlain()
    }

    @Test("itemChanged on a file changed on both sides keeps both (conflict copy uploaded, remote version as placeholder)", arguments: RemoteKind.available)
    func conflictCopies(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("plan.txt", Array("base".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath("plan.txt"))
        try f.writeRemote("plan.txt", Array("remote edit".utf8))
        try f.writeLocalProtected("plan.txt", Array("local edit".utf8))
        let item = try #require(try provider.itemChanged(localPath: f.localPath("plan.txt")))
        #expect(item.filename.hasPrefix("plan (conflict \(ConflictName.hostName()) "))
        #expect(item.filename.hasSuffix(").txt"))
        #expect(try f.read(f.remotePath(item.filename)) == Array("local edit".utf8))
        #expect(try f.read(f.remotePath("plan.txt")) == Array("remote edit".utf8))
        #expect(try f.plaintext(f.localPath(item.filename)) == Array("local edit".utf8))
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("plan.txt"))?.size == 11)
        f.expectRemotePlain()
    }

    @Test("eviction drops the contents and keeps the placeholder; re-materialization gives identical bytes", arguments: RemoteKind.available)
    func evictionAndRematerialization(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        let bytes = randomBytes(300_000, seed: 3)
        try f.writeRemote("big.bin", bytes)
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        let path = f.localPath("big.bin")
        try provider.startProvidingItem(localPath: path)
        let first = try f.plaintext(path)
        #expect(first == bytes)
        try ProviderCommands.evict(path: path)
        #expect(try f.read(path).isEmpty)
        #expect(NonReplicatedProvider.placeholderInfo(localPath: path)?.size == 300_000)
        #expect(try ProviderCommands.status(path: path).materialized == false)
        try provider.startProvidingItem(localPath: path)
        #expect(try f.plaintext(path) == first)
        #expect(try ProviderCommands.status(path: path).materialized)

        // A file with changes not uploaded yet is not evicted.
        try f.writeLocalProtected("big.bin", Array("unsaved work".utf8))
        #expect {
            try provider.stopProvidingItem(localPath: path)
        } throws: { ($0 as? MAMError)?.errno == EBUSY }
        #expect(try f.plaintext(path) == Array("unsaved work".utf8))
        f.expectRemotePlain()
    }

    @Test("a remote that vanishes (directory renamed away, server killed): materializing fails with EHOSTUNREACH, the placeholder refresh reports it, nothing local is removed",
          arguments: RemoteKind.available)
    func remoteVanishes(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("a.txt", Array("a".utf8))
        try f.writeRemote("b.txt", Array("b".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath("a.txt"))
        try f.harness.takeDown()
        #expect {
            try provider.startProvidingItem(localPath: f.localPath("b.txt"))
        } throws: { ($0 as? MAMError)?.errno == EHOSTUNREACH }
        let report = try provider.createPlaceholders()
        #expect(!report.complete && report.errors.first?.errno == EHOSTUNREACH)
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("a".utf8))
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("b.txt")) != nil)
        try f.harness.bringUp()
        try provider.startProvidingItem(localPath: f.localPath("b.txt"))
        #expect(try f.plaintext(f.localPath("b.txt")) == Array("b".utf8))
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)
        f.expectRemotePlain()
    }

    @Test("itemRenamed: a new file renamed over an item takes its identity and uploads as its next version; an uploaded file renamed over another is moved (no re-upload) and the replaced one deleted", arguments: RemoteKind.available)
    func renameOver(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("copyright", Array("old text".utf8))
        try f.writeRemote("other.txt", Array("other".utf8))
        try f.writeRemote("target.txt", Array("target".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()

        // Editor save: copyright.tmp (never uploaded) renamed over the placeholder copyright.
        try f.writeLocalProtected("copyright.tmp", Array("new text".utf8))
        let replaced = LocalItemAttributes.read(path: f.localPath("copyright"))
        #expect(rename(f.localPath("copyright.tmp"), f.localPath("copyright")) == 0)
        try provider.itemRenamed(localPath: f.localPath("copyright"), replaced: replaced)
        #expect(try f.read(f.remotePath("copyright")) == Array("new text".utf8))
        #expect(!f.exists(f.remotePath("copyright.tmp")))
        #expect(!NonReplicatedProvider.hasPendingChanges(localPath: f.localPath("copyright")))
        #expect(LocalItemAttributes.read(path: f.localPath("copyright"))?.identifier == ItemIdentifier("copyright"))

        // mv other.txt target.txt: a remote move of other.txt, target.txt's item deleted.
        try provider.startProvidingItem(localPath: f.localPath("other.txt"))
        let remoteInode = f.inode(f.remotePath("other.txt"))
        let target = LocalItemAttributes.read(path: f.localPath("target.txt"))
        #expect(rename(f.localPath("other.txt"), f.localPath("target.txt")) == 0)
        try provider.itemRenamed(localPath: f.localPath("target.txt"), replaced: target)
        #expect(f.inode(f.remotePath("target.txt")) == remoteInode)
        #expect(try f.read(f.remotePath("target.txt")) == Array("other".utf8))
        #expect(f.files(under: f.remoteRoot).sorted() == ["copyright", "target.txt"])
        f.expectRemotePlain()
    }

    @Test("itemRenamed over an item while the remote is unreachable: the replaced remote item is kept, the file stays pending; provider sync uploads it; evict refuses it with exit 73",
          arguments: RemoteKind.available)
    func renameOverUnreachable(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("memo.txt", Array("v1".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try f.writeLocalProtected("memo.tmp", Array("v2".utf8))
        let replaced = LocalItemAttributes.read(path: f.localPath("memo.txt"))
        #expect(rename(f.localPath("memo.tmp"), f.localPath("memo.txt")) == 0)
        try f.harness.takeDown()
        #expect(throws: MAMError.self) { try provider.itemRenamed(localPath: f.localPath("memo.txt"), replaced: replaced) }
        try f.harness.bringUp()
        #expect(try f.read(f.remotePath("memo.txt")) == Array("v1".utf8), "the replaced item is kept")
        #expect(NonReplicatedProvider.hasPendingChanges(localPath: f.localPath("memo.txt")))
        #expect {
            try ProviderCommands.evict(path: f.localPath("memo.txt"))
        } throws: { error in
            guard let error = error as? MAMError else { return false }
            return error.exitCode == .cantCreate && error.description.contains("has a pending upload")
        }
        let report = provider.uploadPendingChanges()
        #expect(report.isClean && report.modified == 1, "\(report)")
        #expect(try f.read(f.remotePath("memo.txt")) == Array("v2".utf8))
        #expect(f.files(under: f.remoteRoot) == ["memo.txt"])
        #expect(!NonReplicatedProvider.hasPendingChanges(localPath: f.localPath("memo.txt")))
        f.expectRemotePlain()
    }
}
