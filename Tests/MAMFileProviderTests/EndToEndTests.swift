import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// Both providers over a real tree: a copy of /usr/share/doc as the remote.
@Suite("End to end with /usr/share/doc")
struct EndToEndTests {
    static let source = "/usr/share/doc"

    private func copyDocTree(_ f: ProviderFixture) throws {
        let copy = try runProcess("/bin/cp", ["-a", Self.source, f.remotePath("doc")], environment: testEnvironment())
        #expect(copy.status == 0, "\(copy.err)")
    }

    /// Every remote file's bytes against the local plaintext, symlinks by target.
    private func expectSameTree(_ f: ProviderFixture, encrypted: Bool) throws {
        let remoteFiles = f.files(under: f.remoteRoot)
        #expect(remoteFiles.count > 100)
        #expect(f.files(under: f.localRoot) == remoteFiles)
        for relative in remoteFiles {
            let local = f.localPath(relative)
            #expect(try f.plaintext(local) == f.read(f.remotePath(relative)), "\(relative)")
            let header = try f.header(local)
            #expect(header?.owner == ProviderFixture.managedId && header?.isEncrypted == encrypted, "\(relative)")
        }
        guard let walker = FileManager.default.enumerator(atPath: f.remoteRoot) else { return }
        while let relative = walker.nextObject() as? String {
            if let target = FileSystem.readLink(f.remotePath(relative)) {
                #expect(FileSystem.readLink(f.localPath(relative)) == target, "\(relative)")
            }
        }
    }

    @Test("replicated: a first full sync of /usr/share/doc gives the same plaintext for every file; a second pass has nothing to do")
    func replicatedDocTree() throws {
        guard FileManager.default.fileExists(atPath: Self.source) else { return }
        let f = try ProviderFixture()
        try copyDocTree(f)
        let provider = try f.replicated()
        let report = provider.syncOnce()
        #expect(report.isClean, "\(report.errors.prefix(5))")
        try expectSameTree(f, encrypted: true)
        let second = provider.syncOnce()
        #expect(second.isClean && second.fetched == 0 && second.created == 0 && second.modified == 0, "\(second)")
        f.expectRemotePlain()
    }

    @Test("non-replicated: placeholders for /usr/share/doc, then every file materialized gives the remote bytes")
    func nonReplicatedDocTree() throws {
        guard FileManager.default.fileExists(atPath: Self.source) else { return }
        let f = try ProviderFixture()
        try copyDocTree(f)
        let provider = try f.nonReplicated()
        let report = try provider.createPlaceholders()
        #expect(report.isClean, "\(report.errors.prefix(5))")
        for relative in f.files(under: f.remoteRoot) {
            let local = f.localPath(relative)
            let remoteSize = try FileManager.default.attributesOfItem(atPath: f.remotePath(relative))[.size] as? Int
            #expect(NonReplicatedProvider.placeholderInfo(localPath: local)?.size == remoteSize.map(Int64.init), "\(relative)")
            try provider.startProvidingItem(localPath: local)
        }
        try expectSameTree(f, encrypted: true)
        #expect(f.leftoverTemporaryFiles(under: f.localRoot).isEmpty)
        f.expectRemotePlain()
    }
}
