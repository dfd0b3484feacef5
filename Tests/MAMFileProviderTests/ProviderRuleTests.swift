import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// One test per file-provider rule (see ProviderRules), for both providers, each on every
/// remote store (a local directory and a WebDAV server).
@Suite("File-provider rules")
struct ProviderRuleTests {
    enum Case: String, CaseIterable, Sendable {
        case encryptingPolicy, nonEncryptingPolicy, unmanagedDomain
    }

    @Test("provided copies are encrypted exactly when the owner's policy says shouldFileProviderEncryptFiles, plain-tagged otherwise",
          arguments: Case.allCases, RemoteKind.available)
    func providedCopiesFollowPolicy(kind: Case, remote: RemoteKind) throws {
        var policy = Policy.demoEncrypting
        if kind == .nonEncryptingPolicy { policy.fileProviderEncryptFiles = false }
        let f = try ProviderFixture(policy: policy, remoteKind: remote)
        let account = kind == .unmanagedDomain ? "" : ProviderFixture.managedId
        let bytes = randomBytes(10_000)
        try f.writeRemote("a.bin", bytes)
        let remoteBefore = try f.remoteSnapshot()
        let expectEncrypted = kind == .encryptingPolicy

        // Non-replicated: startProvidingItem.
        let nonReplicated = try f.nonReplicated(account, localRoot: f.root + "/nr")
        _ = try nonReplicated.createPlaceholders()
        let provided = f.root + "/nr/a.bin"
        #expect(NonReplicatedProvider.placeholderInfo(localPath: provided) == PlaceholderInfo(identifier: ItemIdentifier("a.bin"), size: 10_000))
        try nonReplicated.startProvidingItem(localPath: provided)
        #expect(NonReplicatedProvider.placeholderInfo(localPath: provided) == nil)

        // Replicated: fetchContents during a pass.
        let replicated = try f.replicated(account, localRoot: f.root + "/r")
        let report = replicated.syncOnce()
        #expect(report.isClean, "\(report.errors)")
        let fetched = f.root + "/r/a.bin"

        for path in [provided, fetched] {
            let header = try #require(try f.header(path))
            #expect(header.isEncrypted == expectEncrypted, "\(path)")
            #expect(header.owner == account)
            #expect(try f.plaintext(path) == bytes)
            if expectEncrypted {
                #expect(!Data(try f.read(path)).contains(Data(bytes[0..<64])))
            } else {
                #expect(Array(try f.read(path).suffix(bytes.count)) == bytes)
            }
        }
        #expect(try f.remoteSnapshot() == remoteBefore, "providing never modifies the remote")
        #expect(f.leftoverTemporaryFiles(under: f.root).isEmpty)
        f.expectRemotePlain()
    }

    @Test("the remote never holds a file starting with the protected-file magic, whatever goes up (and the scan does find one)", arguments: RemoteKind.available)
    func remoteNeverHoldsProtectedFiles(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("base.txt", Array("base".utf8))
        let replicated = try f.replicated(localRoot: f.root + "/replica")
        let nonReplicated = try f.nonReplicated()
        _ = replicated.syncOnce()
        _ = try nonReplicated.createPlaceholders()
        f.expectRemotePlain()
        let steps: [(String, () throws -> Void)] = [
            ("replicated createItem of an encrypted file", {
                try f.write(f.outside + "/r1", randomBytes(9000, seed: 1))
                try f.context.files.encryptFile(path: f.outside + "/r1", forAccountId: ProviderFixture.managedId)
                #expect(rename(f.outside + "/r1", f.root + "/replica/r1.bin") == 0)
                #expect(replicated.syncOnce().isClean)
            }),
            ("replicated modifyItem of a plain-tagged file", {
                let header = try ProtectedFileHeader(plainOwner: ProviderFixture.managedId).encoded()
                try f.write(f.root + "/replica/base.txt", header + Array("tagged plain".utf8))
                #expect(replicated.syncOnce().isClean)
                #expect(try f.read(f.remotePath("base.txt")) == Array("tagged plain".utf8))
            }),
            ("non-replicated itemChanged and importDocument", {
                try nonReplicated.startProvidingItem(localPath: f.localPath("base.txt"))
                try f.writeLocalProtected("base.txt", randomBytes(5000, seed: 2))
                try nonReplicated.itemChanged(localPath: f.localPath("base.txt"))
                let source = try f.write(f.outside + "/imp.bin", randomBytes(5000, seed: 3))
                try f.context.files.encryptFile(path: source, forAccountId: ProviderFixture.managedId)
                try nonReplicated.importDocument(sourcePath: source, toLocalDirectory: f.localRoot)
            }),
            ("replicated conflict copy of an encrypted local edit", {
                _ = replicated.syncOnce()
                try f.writeRemote("r1.bin", Array("remote side".utf8))
                try f.write(f.outside + "/r1", Array("local side".utf8))
                try f.context.files.encryptFile(path: f.outside + "/r1", forAccountId: ProviderFixture.managedId)
                #expect(rename(f.outside + "/r1", f.root + "/replica/r1.bin") == 0)
                #expect(replicated.syncOnce().conflicts == 1)
            }),
        ]
        for (name, step) in steps {
            try step()
            #expect(f.protectedFilesOnRemote() == [], "after: \(name)")
        }
        #expect(f.files(under: f.remoteRoot).count >= 4)
        // The scan itself can fail.
        try f.write(f.remotePath("planted.bin"), ProtectedFileHeader.magic + [1, 2, 3])
        #expect(f.protectedFilesOnRemote() == ["planted.bin"])
        #expect(unlink(f.remotePath("planted.bin")) == 0)
    }

    @Test("an encrypted import is decrypted to a copy before upload; the source stays encrypted", arguments: RemoteKind.available)
    func encryptedImportDecryptedBeforeUpload(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        let bytes = randomBytes(70_000, seed: 7)
        let source = try f.write(f.outside + "/report.docx", bytes)
        try f.context.files.encryptFile(path: source, forAccountId: ProviderFixture.managedId)
        let sourceBefore = try f.read(source)
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        let item = try provider.importDocument(sourcePath: source, toLocalDirectory: f.localRoot)
        #expect(item.filename == "report.docx")
        #expect(item.ownerAccountId == ProviderFixture.managedId)
        #expect(try f.read(f.remotePath("report.docx")) == bytes, "the remote holds the plain copy")
        #expect(try f.read(source) == sourceBefore, "the source is untouched")
        let local = f.localPath("report.docx")
        #expect(try f.header(local)?.isEncrypted == true, "the local copy is provided per the encrypt rule")
        #expect(try f.plaintext(local) == bytes)

        // Replicated: an encrypted local file goes up as plaintext (createItem), a change to it too (modifyItem).
        let replicated = try f.replicated(localRoot: f.root + "/replica")
        _ = replicated.syncOnce()
        let changed = randomBytes(5000, seed: 8)
        let replicaFile = f.root + "/replica/new.bin"
        let staging = try f.write(f.outside + "/new.bin", changed)
        try f.context.files.encryptFile(path: staging, forAccountId: ProviderFixture.managedId)
        #expect(rename(staging, replicaFile) == 0)
        let report = replicated.syncOnce()
        #expect(report.created == 1, "\(report)")
        #expect(try f.read(f.remotePath("new.bin")) == changed)
        f.expectRemotePlain()
    }

    @Test("a refused import leaves the remote and the source byte-for-byte unchanged (EACCES, exit 77)", arguments: RemoteKind.available)
    func refusedImportLeavesRemoteAndSourceUnchanged(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)   // demoEncrypting: receiveData managedOnly
        try f.writeRemote("existing.txt", Array("already there".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        let personal = try f.write(f.outside + "/personal.txt", Array("my holiday photos".utf8))
        try f.context.files.protect(path: personal, accountId: "", recursive: false)
        let untagged = try f.write(f.outside + "/untagged.txt", Array("from a USB stick".utf8))
        for source in [personal, untagged] {
            let sourceBefore = try f.read(source)
            let remoteBefore = try f.remoteSnapshot()
            #expect {
                try provider.importDocument(sourcePath: source, toLocalDirectory: f.localRoot)
            } throws: { error in
                guard let error = error as? MAMError, case .policyDenied = error else { return false }
                return error.errno == EACCES && error.exitCode == .noPerm
            }
            #expect(try f.read(source) == sourceBefore)
            #expect(try f.remoteSnapshot() == remoteBefore)
            #expect(!f.exists(f.localPath((source as NSString).lastPathComponent)))
        }
        // Through the command the CLI calls.
        #expect(throws: MAMError.self) {
            try ProviderCommands.importFile(untagged, toDirectory: f.localRoot, context: f.context)
        }
        // Replicated: a personal file dropped into a managed replica is refused, reported, kept.
        let replicated = try f.replicated(localRoot: f.root + "/replica")
        _ = replicated.syncOnce()
        let dropped = try f.write(f.root + "/replica/personal.txt", try f.read(personal))
        let remoteBefore = try f.remoteSnapshot()
        let report = replicated.syncOnce()
        #expect(report.refused == 1)
        #expect(report.errors.contains { $0.path == "personal.txt" && $0.errno == EACCES })
        #expect(report.exitCode == .noPerm)
        #expect(try f.remoteSnapshot() == remoteBefore)
        #expect(f.exists(dropped), "the refused local file is kept")
        #expect(f.leftoverTemporaryFiles(under: f.root).isEmpty)
        f.expectRemotePlain()
    }

    @Test("every item handed out carries its owner (protectFileProviderItem)", arguments: RemoteKind.available)
    func itemsCarryTheirOwner(remote: RemoteKind) throws {
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("d/x.txt", Array("x".utf8))
        try f.writeRemote("y.txt", Array("y".utf8))
        let domain = try f.domain(ProviderFixture.managedUPN)
        #expect(domain.accountId == ProviderFixture.managedId, "a UPN resolves to the accountId")
        let items = try domain.enumerator(for: .rootContainer).enumerateTree()
        #expect(items.count == 3)
        #expect(items.allSatisfy { $0.ownerAccountId == ProviderFixture.managedId })
        let provider = try f.nonReplicated(ProviderFixture.managedUPN)
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath("d/x.txt"))
        #expect(try f.header(f.localPath("d/x.txt"))?.owner == ProviderFixture.managedId)
        let status = try ProviderCommands.status(path: f.localPath("d/x.txt"))
        #expect(status.owner == ProviderFixture.managedId)
        #expect(status.localOwner == ProviderFixture.managedId)
        f.expectRemotePlain()
    }

    @Test("enumeration runs under the domain's account (setAccountId(onFileProviderEnumerator))", arguments: RemoteKind.available)
    func enumerationUnderDomainAccount(remote: RemoteKind) throws {
        // One managed account at a time (as in the reference SDK); the other GUID is an
        // unregistered, therefore unmanaged, identity.
        let f = try ProviderFixture(remoteKind: remote)
        try f.writeRemote("shared.txt", Array("same remote".utf8))
        for (account, encrypted) in [(ProviderFixture.managedId, true), (ProviderFixture.unmanagedId, false), ("", false)] {
            let domain = try f.domain(account)
            let enumerator = domain.enumerator(for: .rootContainer)
            #expect(enumerator.accountId == account)
            #expect(try enumerator.enumerateItems().map(\.ownerAccountId) == [account])
            let root = f.root + "/local-\(account.isEmpty ? "unmanaged" : account)"
            let replicated = try ReplicatedProvider(replicaRoot: root, domain: domain)
            #expect(replicated.syncOnce().isClean)
            let header = try #require(try f.header(root + "/shared.txt"))
            #expect(header.owner == account)
            #expect(header.isEncrypted == encrypted)
        }
        // A root stays bound to its account.
        #expect(throws: MAMError.self) { try f.replicated("", localRoot: f.root + "/local-\(ProviderFixture.managedId)") }
        f.expectRemotePlain()
    }
}
