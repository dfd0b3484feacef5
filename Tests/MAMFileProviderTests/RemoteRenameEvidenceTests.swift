import Foundation
import Glibc
import Testing
@testable import MAMFileProvider
import MAMTestSupport

/// A store without file ids (Apache's mod_dav_fs) ties a renamed file to its old self only by
/// its entity tag, which Apache makes of size and mtime: another file of the same size and
/// mtime has the same one. Such a twin must be fetched as itself, never taken for the vanished
/// file's rename (which kept the old bytes under the new name, or uploaded a local edit over
/// the twin), while a real rename is still followed.
@Suite("Providers: a remote rename needs more than an entity tag")
struct RemoteRenameEvidenceTests {
    /// The contentVersion the fixture's store lists for `name`.
    static func version(_ f: ProviderFixture, _ name: String) throws -> String? {
        try f.store().enumerate(container: .rootContainer).first { $0.filename == name }?.version.contentVersion
    }

    /// Removes `old` from the served directory and puts `name` with `bytes` (as long as the old
    /// file) in its place with the old file's exact mtime, as another client would; checks that
    /// the server lists the newcomer with the vanished file's entity tag.
    static func putTwin(_ f: ProviderFixture, of old: String, as name: String, _ bytes: [UInt8],
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
        let tag = try version(f, old)
        var st = stat()
        #expect(lstat(f.remotePath(old), &st) == 0 && Int(st.st_size) == bytes.count, sourceLocation: sourceLocation)
        try f.writeRemote(name, bytes)
        var times = [st.st_atim, st.st_mtim]
        #expect(utimensat(AT_FDCWD, f.remotePath(name), &times, AT_SYMLINK_NOFOLLOW) == 0, sourceLocation: sourceLocation)
        #expect(unlink(f.remotePath(old)) == 0, sourceLocation: sourceLocation)
        let twin = try version(f, name)
        #expect(tag != nil && twin == tag, "the twin lists with the vanished file's tag", sourceLocation: sourceLocation)
    }

    @Test("replicated: a twin is fetched as itself and the vanished file deleted locally; a real rename still moves the local file",
          .enabled(if: ApacheDAVServer.isAvailable))
    func replicatedTwinIsNotARename() throws {
        let f = try ProviderFixture(remoteKind: .webdav)
        try f.writeRemote("a.txt", Array("first file".utf8))
        try f.writeRemote("moves.txt", Array("a file that moves".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)
        let movedInode = f.inode(f.localPath("moves.txt"))

        try Self.putTwin(f, of: "a.txt", as: "b.txt", Array("other file".utf8))
        #expect(rename(f.remotePath("moves.txt"), f.remotePath("moved.txt")) == 0)
        let report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        #expect(try f.plaintext(f.localPath("b.txt")) == Array("other file".utf8))
        #expect(!f.exists(f.localPath("a.txt")))
        #expect(f.inode(f.localPath("moved.txt")) == movedInode, "a real rename keeps the local file")
        #expect(try f.plaintext(f.localPath("moved.txt")) == Array("a file that moves".utf8))
        #expect(report.movedLocally == 1 && report.fetched == 1 && report.deletedLocally == 1, "\(report)")
        #expect(try f.read(f.remotePath("b.txt")) == Array("other file".utf8), "the twin is untouched on the remote")
        f.expectRemotePlain()
    }

    @Test("replicated: a local edit of the vanished file is kept and uploaded under its own name, never over the twin",
          .enabled(if: ApacheDAVServer.isAvailable))
    func replicatedEditIsNotUploadedOverTheTwin() throws {
        let f = try ProviderFixture(remoteKind: .webdav)
        try f.writeRemote("a.txt", Array("first file".utf8))
        let provider = try f.replicated()
        #expect(provider.syncOnce().isClean)

        try f.writeLocalProtected("a.txt", Array("edited here".utf8))
        try Self.putTwin(f, of: "a.txt", as: "b.txt", Array("other file".utf8))
        let report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        #expect(try f.read(f.remotePath("b.txt")) == Array("other file".utf8), "the twin keeps its bytes")
        #expect(try f.read(f.remotePath("a.txt")) == Array("edited here".utf8), "the edit is uploaded as a.txt")
        #expect(try f.plaintext(f.localPath("a.txt")) == Array("edited here".utf8))
        #expect(try f.plaintext(f.localPath("b.txt")) == Array("other file".utf8))
        f.expectRemotePlain()
    }

    @Test("non-replicated: a twin of a materialized copy or of a placeholder shows its own bytes; a real rename is still followed",
          .enabled(if: ApacheDAVServer.isAvailable))
    func nonReplicatedTwinIsNotARename() throws {
        let f = try ProviderFixture(remoteKind: .webdav)
        try f.writeRemote("a.txt", Array("first file".utf8))
        try f.writeRemote("c.txt", Array("third one".utf8))
        try f.writeRemote("moves.txt", Array("a file that moves".utf8))
        let provider = try f.nonReplicated()
        #expect(try provider.createPlaceholders().isClean)
        try provider.startProvidingItem(localPath: f.localPath("a.txt"))
        try provider.startProvidingItem(localPath: f.localPath("moves.txt"))
        let movedInode = f.inode(f.localPath("moves.txt"))

        try Self.putTwin(f, of: "a.txt", as: "b.txt", Array("other file".utf8))
        try Self.putTwin(f, of: "c.txt", as: "d.txt", Array("forth one".utf8))
        #expect(rename(f.remotePath("moves.txt"), f.remotePath("moved.txt")) == 0)
        let report = try provider.createPlaceholders()
        #expect(report.isClean, "\(report.errors)")
        #expect(!f.exists(f.localPath("a.txt")) && !f.exists(f.localPath("c.txt")))
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.localPath("b.txt")) != nil,
                "the twin is a placeholder of its own, not the old copy")
        try provider.startProvidingItem(localPath: f.localPath("b.txt"))
        try provider.startProvidingItem(localPath: f.localPath("d.txt"))
        #expect(try f.plaintext(f.localPath("b.txt")) == Array("other file".utf8))
        #expect(try f.plaintext(f.localPath("d.txt")) == Array("forth one".utf8))
        #expect(f.inode(f.localPath("moved.txt")) == movedInode, "a real rename keeps the materialized copy")
        #expect(try f.plaintext(f.localPath("moved.txt")) == Array("a file that moves".utf8))
        f.expectRemotePlain()
    }
}
