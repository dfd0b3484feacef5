import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

@Suite("Enrollment, keys and selective wipe")
struct EnrollmentAndKeyTests {
    @Test("one managed account at a time, as in the reference SDK")
    func oneManagedAccount() throws {
        let f = try StateFixture()
        #expect(throws: MAMError.self) {
            try f.context.enrollment.enroll(accountId: StateFixture.otherId, upn: "bob@contoso.com", policy: .demoEncrypting)
        }
        // Re-enrolling the same account is allowed (policy refresh).
        try f.context.enrollment.enroll(accountId: StateFixture.managedId.uppercased(), upn: nil, policy: .demoEncrypting)
        #expect(try f.context.enrollment.accounts().filter(\.managed).count == 1)
        try f.context.enrollment.unenroll(StateFixture.managedUPN, wipe: false, roots: [])
        try f.context.enrollment.enroll(accountId: StateFixture.otherId, upn: "bob@contoso.com", policy: .demoEncrypting)
        #expect(try f.context.enrollment.accounts().filter(\.managed).map(\.accountId) == [StateFixture.otherId])
    }

    @Test("accounts are named by accountId or UPN, case-insensitively")
    func accountNames() throws {
        let f = try StateFixture()
        #expect(try f.context.resolveAccount("ALICE@contoso.COM").accountId == StateFixture.managedId)
        #expect(try f.context.resolveAccount(StateFixture.managedId.uppercased()).upn == "alice@contoso.com")
        #expect(throws: MAMError.unknownAccount("'carol@contoso.com' is not registered (see 'mamfs accounts')")) {
            try f.context.resolveAccount("carol@contoso.com")
        }
    }

    @Test("unenroll without wipe keeps encrypted files readable")
    func unenrollKeepsKeys() throws {
        let f = try StateFixture()
        let p = try f.write("keep", Array("kept".utf8))
        try f.context.files.protect(path: p, accountId: StateFixture.managedId)
        try f.context.enrollment.unenroll(StateFixture.managedId, wipe: false, roots: [])
        #expect(try f.plaintext(p) == Array("kept".utf8))
        #expect(f.context.policyEvaluator.isFileEncryptionRequired(accountId: StateFixture.managedId) == false)
    }

    @Test("selective wipe removes the account's files, keeps others, and destroys its keys")
    func selectiveWipe() throws {
        let f = try StateFixture()
        let owned = try f.write("tree/owned.txt", Array("work".utf8))
        let ownedCopy = try f.write("elsewhere/copy.txt", Array("work".utf8))
        let personal = try f.write("tree/personal.txt", Array("mine".utf8))
        let other = try f.write("tree/other.txt", Array("theirs".utf8))
        try f.context.files.protect(path: owned, accountId: StateFixture.managedId)
        try f.context.files.encryptFile(path: ownedCopy, forAccountId: StateFixture.managedId)
        try FileManager.default.copyItem(atPath: ownedCopy, toPath: f.root + "/backup.bin")
        try f.context.files.protect(path: other, accountId: StateFixture.otherId)
        let report = try f.context.enrollment.wipe(StateFixture.managedUPN, roots: [f.path("elsewhere")])
        #expect(report.keysDestroyed == 1)
        #expect(report.removedFiles == 2)
        #expect(!FileManager.default.fileExists(atPath: owned))
        #expect(!FileManager.default.fileExists(atPath: ownedCopy))
        #expect(try f.read(personal) == Array("mine".utf8))
        #expect(try f.plaintext(other) == Array("theirs".utf8))
        // The copy outside every root survives as bytes but can no longer be read.
        #expect(throws: MAMError.keyUnavailable("no key 1 for account \(StateFixture.managedId) (the account was wiped or is not registered here)")) {
            _ = try f.plaintext(f.root + "/backup.bin")
        }
        #expect(f.context.isWiped(owner: StateFixture.managedId))
        // A new process sees the same.
        let reopened = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        #expect(reopened.isWiped(owner: StateFixture.managedId))
    }

    @Test("a passphrase-protected state opens with the right passphrase and refuses a wrong or missing one")
    func passphrase() throws {
        let temporary = try TempDirectory(prefix: "mamfs-pass")
        let dir = temporary.path
        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: dir + "/pass"))
        try Data("wrong horse\n".utf8).write(to: URL(fileURLWithPath: dir + "/bad"))
        let state = StateDirectory(path: dir + "/state")
        try ProtectionContext.initialize(stateDirectory: state, passphraseFile: dir + "/pass")
        #expect(!FileManager.default.fileExists(atPath: state.masterKeyURL.path))
        _ = try ProtectionContext.open(stateDirectory: state, passphraseFile: dir + "/pass")
        #expect(throws: MAMError.keyUnavailable("wrong passphrase")) {
            _ = try ProtectionContext.open(stateDirectory: state, passphraseFile: dir + "/bad")
        }
        #expect(throws: MAMError.self) { _ = try ProtectionContext.open(stateDirectory: state, passphraseFile: nil) }
    }

    @Test("a swapped master key file is detected; the key file is 0600")
    func masterKeyFile() throws {
        let f = try StateFixture()
        var st = stat()
        stat(f.stateDirectory.masterKeyURL.path, &st)
        #expect(st.st_mode & 0o777 == 0o600)
        try Data(randomBytes(32, seed: 7)).write(to: f.stateDirectory.masterKeyURL)
        #expect(throws: MAMError.keyUnavailable("the master key file \(f.stateDirectory.masterKeyURL.path) does not belong to this state")) {
            _ = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        }
    }

    @Test("init refuses an existing state")
    func initTwice() throws {
        let f = try StateFixture()
        #expect(throws: MAMError.cannotCreateOutput("\(f.stateDirectory) already holds a mamfs state")) {
            try ProtectionContext.initialize(stateDirectory: f.stateDirectory, passphraseFile: nil)
        }
    }

    @Test("a running context notices changes made by another process")
    func refreshSeesOtherProcess() throws {
        let f = try StateFixture()
        let other = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        #expect(f.context.policyEvaluator.isFileEncryptionRequired(accountId: StateFixture.managedId))
        var relaxed = Policy.demoEncrypting
        relaxed.fileEncryptionRequired = false
        try other.enrollment.setPolicy(StateFixture.managedId, relaxed)
        #expect(f.context.refreshIfChanged())
        #expect(f.context.policyEvaluator.isFileEncryptionRequired(accountId: StateFixture.managedId) == false)
        #expect(f.context.refreshIfChanged() == false)
    }

    @Test("a stored account key moved to another account does not unwrap")
    func accountKeyBinding() throws {
        let f = try StateFixture()
        let wrapped = try #require(try f.context.state.accountKey(StateFixture.managedId, keyId: 1))
        _ = try f.context.state.upsertAccount(AccountRecord(accountId: StateFixture.otherId, managed: false))
        try f.context.state.insertAccountKey(StateFixture.otherId, keyId: 1, wrapped: wrapped)
        #expect(throws: MAMError.authenticationFailed("the stored key 1 of account \(StateFixture.otherId) does not authenticate")) {
            _ = try f.context.keys.key(accountId: StateFixture.otherId, keyId: 1)
        }
    }

    @Test("protecting files or data for a wiped account is refused (key unavailable), never silently plain")
    func protectForWipedAccountRefused() throws {
        let f = try StateFixture()
        try f.context.enrollment.wipe(StateFixture.managedUPN, roots: [])
        let p = try f.write("personal.txt", Array("mine".utf8))
        #expect(throws: MAMError.keyUnavailable("account alice@contoso.com was wiped; nothing can be protected for it until it is enrolled again")) {
            try f.context.files.protect(path: p, accountId: StateFixture.managedUPN)
        }
        #expect(throws: MAMError.self) { _ = try f.context.data.protect(Data("secret".utf8), accountId: StateFixture.managedId) }
        #expect(try f.context.files.protectionInfo(path: p) == nil)
        #expect(try f.read(p) == Array("mine".utf8))
        // Enrolled again, it works with a new key.
        try f.context.enrollment.enroll(accountId: StateFixture.managedId, upn: StateFixture.managedUPN, policy: .demoEncrypting)
        try f.context.files.protect(path: p, accountId: StateFixture.managedUPN)
        #expect(try f.context.files.isFileEncrypted(path: p))
        #expect(try f.plaintext(p) == Array("mine".utf8))
    }
}
