import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// The local-directory store with its file ids hidden: a store that only has path identifiers.
private struct PathOnlyRemote: RemoteStore {
    let inner: LocalDirectoryRemote
    private func strip(_ item: RemoteItem) -> RemoteItem { var item = item; item.fileID = nil; return item }
    var location: String { inner.location }
    func volumeIdentity() throws -> String? { try inner.volumeIdentity() }
    func enumerate(container: ItemIdentifier) throws -> [RemoteItem] { try inner.enumerate(container: container).map(strip) }
    func item(_ identifier: ItemIdentifier) throws -> RemoteItem { strip(try inner.item(identifier)) }
    func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem {
        strip(try inner.readContents(of: identifier, into: destination))
    }
    func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem {
        strip(try inner.create(parent: parent, name: name, contents: contents))
    }
    func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem {
        strip(try inner.modify(identifier, baseVersion: baseVersion, contentsURL: contentsURL))
    }
    func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws { try inner.delete(identifier, baseVersion: baseVersion) }
    func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem {
        strip(try inner.move(identifier, toParent: newParent, newName: newName))
    }
}

@Suite("Stable item identifiers")
struct ItemIdentityTests {
    private func identifier(_ f: ProviderFixture, _ relative: String) throws -> ItemIdentifier? {
        try ProviderCommands.status(path: f.localPath(relative)).itemIdentifier
    }

    @Test("the local-directory store gives every item its device, inode and birth time as fileID, kept by a rename")
    func localDirectoryFileIDs() throws {
        let f = try ProviderFixture()
        try f.writeRemote("d/x.txt", Array("x".utf8))
        let remote = f.remote()
        let before = try remote.item(ItemIdentifier("d/x.txt"))
        var st = stat()
        #expect(lstat(f.remotePath("d/x.txt"), &st) == 0)
        #expect(before.fileID?.hasPrefix("\(st.st_dev):\(st.st_ino):") == true, "device, inode and birth time: \(before.fileID ?? "")")
        #expect(rename(f.remotePath("d"), f.remotePath("e")) == 0)
        #expect(try remote.item(ItemIdentifier("e/x.txt")).fileID == before.fileID)
        #expect(try remote.item(ItemIdentifier("e")).fileID != before.fileID)
    }

    @Test("non-replicated: a directory renamed through the provider and then on the remote: its children keep their identifiers, bytes, owner and state; a new item at an old path gets another one",
          arguments: [false, true])
    func nonReplicatedDirectoryRenames(pathOnly: Bool) throws {
        let f = try ProviderFixture()
        try f.writeRemote("dir/a.txt", Array("alpha".utf8))
        try f.writeRemote("dir/sub/b.txt", Array("beta".utf8))
        let provider = try f.nonReplicated(remote: pathOnly ? PathOnlyRemote(inner: f.remote()) : nil)
        #expect(try provider.createPlaceholders().isClean)
        try provider.startProvidingItem(localPath: f.localPath("dir/a.txt"))
        let a = try #require(try identifier(f, "dir/a.txt"))
        let b = try #require(try identifier(f, "dir/sub/b.txt"))
        #expect(a != b)

        // Through the provider (what the mount does after a local rename).
        #expect(rename(f.localPath("dir"), f.localPath("moved")) == 0)
        let moved = try provider.itemMoved(localPath: f.localPath("moved"))
        #expect(f.exists(f.remotePath("moved/sub/b.txt")))
        #expect(try identifier(f, "moved/a.txt") == a)
        #expect(try identifier(f, "moved/sub/b.txt") == b)
        #expect(moved.itemIdentifier == ItemIdentifier("dir"), "the directory's own identifier is kept too")

        // On the remote, followed by the next refresh.
        let localInode = f.inode(f.localPath("moved/a.txt"))
        #expect(rename(f.remotePath("moved"), f.remotePath("renamed")) == 0)
        let report = try provider.createPlaceholders()
        #expect(report.isClean, "\(report)")
        // Without file ids only the files are recognised: the two directories are made anew.
        #expect(report.deletedLocally == (pathOnly ? 2 : 0) && report.movedLocally >= 1, "\(report)")
        #expect(!f.exists(f.localPath("moved")))
        #expect(try identifier(f, "renamed/a.txt") == a)
        #expect(try identifier(f, "renamed/sub/b.txt") == b)
        #expect(f.inode(f.localPath("renamed/a.txt")) == localInode, "the materialized copy was moved, not fetched again")
        #expect(try ProviderCommands.status(path: f.localPath("renamed/a.txt")).materialized)
        #expect(try f.plaintext(f.localPath("renamed/a.txt")) == Array("alpha".utf8))
        #expect(try f.header(f.localPath("renamed/a.txt"))?.owner == ProviderFixture.managedId)
        try provider.startProvidingItem(localPath: f.localPath("renamed/sub/b.txt"))
        #expect(try f.plaintext(f.localPath("renamed/sub/b.txt")) == Array("beta".utf8))

        // A new remote item where a moved one used to be is another item.
        try f.writeRemote("dir/a.txt", Array("newcomer".utf8))
        #expect(try provider.createPlaceholders().isClean)
        let newcomer = try #require(try identifier(f, "dir/a.txt"))
        #expect(newcomer != a && newcomer != b)
        #expect(try identifier(f, "renamed/a.txt") == a)
        f.expectRemotePlain()
    }

    @Test("replicated: a directory renamed in the replica and then on the remote: its children keep their identifiers, bytes and owner",
          arguments: [false, true])
    func replicatedDirectoryRenames(pathOnly: Bool) throws {
        let f = try ProviderFixture()
        try f.writeRemote("dir/a.txt", Array("alpha".utf8))
        try f.writeRemote("dir/sub/b.txt", Array("beta".utf8))
        let provider = try f.replicated(remote: pathOnly ? PathOnlyRemote(inner: f.remote()) : nil)
        #expect(provider.syncOnce().isClean)
        let a = try #require(try identifier(f, "dir/a.txt"))
        let b = try #require(try identifier(f, "dir/sub/b.txt"))

        #expect(rename(f.localPath("dir"), f.localPath("moved")) == 0)
        let pushed = provider.syncOnce()
        #expect(pushed.isClean && pushed.movedRemotely == 1, "\(pushed)")
        #expect(f.exists(f.remotePath("moved/sub/b.txt")))
        #expect(try identifier(f, "moved/a.txt") == a)
        #expect(try identifier(f, "moved/sub/b.txt") == b)
        #expect(try ProviderCommands.status(path: f.localPath("moved/sub/b.txt")).parentItemIdentifier
                == ProviderCommands.status(path: f.localPath("moved/sub")).itemIdentifier)

        #expect(rename(f.remotePath("moved"), f.remotePath("renamed")) == 0)
        let pulled = provider.syncOnce()
        #expect(pulled.isClean && pulled.movedLocally >= 1 && pulled.deletedLocally == 0, "\(pulled)")
        #expect(try identifier(f, "renamed/a.txt") == a)
        #expect(try identifier(f, "renamed/sub/b.txt") == b)
        #expect(try f.plaintext(f.localPath("renamed/a.txt")) == Array("alpha".utf8))
        #expect(try f.plaintext(f.localPath("renamed/sub/b.txt")) == Array("beta".utf8))
        #expect(try f.header(f.localPath("renamed/sub/b.txt"))?.owner == ProviderFixture.managedId)
        f.expectRemotePlain()
    }

    @Test("replicated: a file renamed and edited on the remote at once is followed by its fileID: moved locally with its identifier, new bytes fetched")
    func replicatedRenameAndEdit() throws {
        let f = try ProviderFixture()
        try f.writeRemote("notes.txt", Array("first".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        let id = try #require(try identifier(f, "notes.txt"))
        #expect(rename(f.remotePath("notes.txt"), f.remotePath("notes-renamed.txt")) == 0)
        let handle = try #require(FileHandle(forWritingAtPath: f.remotePath("notes-renamed.txt")))
        handle.seekToEndOfFile()
        handle.write(Data(" and more".utf8))
        try handle.close()
        let report = provider.syncOnce()
        #expect(report.isClean && report.movedLocally == 1 && report.deletedLocally == 0, "\(report)")
        #expect(!f.exists(f.localPath("notes.txt")))
        #expect(try identifier(f, "notes-renamed.txt") == id)
        #expect(try f.plaintext(f.localPath("notes-renamed.txt")) == Array("first and more".utf8))
    }

    @Test("the local-directory store: a new file that got a vanished file's inode number at once (ext4 hands them out again), with its size and mtime, is no rename of it",
          arguments: ["replicated", "non-replicated"])
    func reusedInodeIsNoRename(kind: String) throws {
        let f = try ProviderFixture()
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
        let replicated = kind == "replicated" ? try f.replicated() : nil
        let nonReplicated = kind == "replicated" ? nil : try f.nonReplicated()
        func pass() throws -> SyncReport { try replicated?.syncOnce() ?? nonReplicated!.createPlaceholders() }
        // Other processes take freed inode numbers too (tests run in parallel): tried until the
        // new file gets the old one's.
        var names: (old: String, new: String)?
        for attempt in 1...100 where names == nil {
            let old = "a\(attempt).txt", new = "b\(attempt).txt"
            try f.writeRemote(old, Array("AAAA-original".utf8))
            #expect(utimensat(AT_FDCWD, f.remotePath(old), &times, 0) == 0)
            #expect(try pass().isClean)
            try nonReplicated?.startProvidingItem(localPath: f.localPath(old))
            let inode = f.inode(f.remotePath(old))
            #expect(unlink(f.remotePath(old)) == 0)
            try f.writeRemote(new, Array("BBBB-newfile!".utf8))
            #expect(utimensat(AT_FDCWD, f.remotePath(new), &times, 0) == 0)
            if f.inode(f.remotePath(new)) == inode { names = (old, new) } else { #expect(unlink(f.remotePath(new)) == 0) }
        }
        let (old, new) = try #require(names, "no new file got the freed inode number in 100 attempts")

        let report = try pass()
        #expect(report.isClean && report.movedLocally == 0, "\(report)")
        #expect(!f.exists(f.localPath(old)))
        try nonReplicated?.startProvidingItem(localPath: f.localPath(new))
        #expect(try f.plaintext(f.localPath(new)) == Array("BBBB-newfile!".utf8))
        #expect(try f.read(f.remotePath(new)) == Array("BBBB-newfile!".utf8))
    }
}
