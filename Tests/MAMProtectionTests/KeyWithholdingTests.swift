import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMTestSupport

/// Keys withheld from memory and restored (`ProtectionContext.withholdKeys`, `restoreKeys`).
@Suite("Key withholding: the master key and an account's keys dropped from memory and loaded again")
struct KeyWithholdingTests {
    static let bobId = "2d3e4f50-0000-4000-8000-000000000003"

    /// A state where alice (managed first, then unenrolled without wipe) still has a key and
    /// a protected file, and bob is the managed account with one of his own.
    static func twoAccounts(passphraseFile: String? = nil) throws -> (StateFixture, alice: String, bob: String) {
        let f = try StateFixture(passphraseFile: passphraseFile)
        let alice = try f.write("alice.txt", Array("alice's work".utf8))
        try f.context.files.protect(path: alice, accountId: StateFixture.managedId)
        try f.context.enrollment.unenroll(StateFixture.managedId, wipe: false, roots: [])
        try f.context.enrollment.enroll(accountId: bobId, upn: "bob@contoso.com", policy: .demoEncrypting)
        let bob = try f.write("bob.txt", Array("bob's work".utf8))
        try f.context.files.protect(path: bob, accountId: bobId)
        return (f, alice, bob)
    }

    @Test("withheld: the account's files, buffers and new files fail with keyUnavailable (EACCES, exit 77) and the master key is gone; another account with keys goes on; restore brings back the same bytes")
    func withholdAndRestore() throws {
        let (f, alice, bob) = try Self.twoAccounts()
        let buffer = try f.context.data.protect(Data("buffer".utf8), accountId: Self.bobId)
        try f.context.withholdKeys(of: [Self.bobId.uppercased()])
        #expect(f.context.withheldAccounts == [Self.bobId])
        #expect(!f.context.holdsMasterKey)
        do {
            _ = try f.plaintext(bob)
            Issue.record("bob's file was readable while his keys were withheld")
        } catch let error as MAMError {
            guard case .keyUnavailable = error else { Issue.record("\(error)"); return }
            #expect(error.errno == EACCES && error.exitCode == .noPerm)
        }
        #expect(throws: MAMError.self) { try f.context.data.unprotect(buffer) }
        #expect(throws: MAMError.self) { try f.context.newFileHeader(owner: Self.bobId) }
        // alice's key was unwrapped before the master key went: her file still reads.
        #expect(try f.plaintext(alice) == Array("alice's work".utf8))
        // A new key cannot be made without the master key.
        #expect(throws: MAMError.self) { try f.context.keys.createKey(accountId: Self.bobId) }
        try f.context.restoreKeys(passphraseFile: nil)
        #expect(f.context.withheldAccounts.isEmpty && f.context.holdsMasterKey)
        #expect(try f.plaintext(bob) == Array("bob's work".utf8))
        #expect(try f.context.data.unprotect(buffer) == Data("buffer".utf8))
    }

    @Test("a passphrase state: restore without the passphrase or with a wrong one fails and keeps the keys withheld; the right passphrase restores")
    func passphraseRestore() throws {
        let dir = try TempDirectory(prefix: "mamfs-pass")
        let right = dir.file("right")
        let wrong = dir.file("wrong")
        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: right))
        try Data("battery staple\n".utf8).write(to: URL(fileURLWithPath: wrong))
        let (f, _, bob) = try Self.twoAccounts(passphraseFile: right)
        try f.context.withholdKeys(of: [Self.bobId])
        for attempt in [nil, wrong] {
            do {
                try f.context.restoreKeys(passphraseFile: attempt)
                Issue.record("restore with \(attempt ?? "no passphrase") succeeded")
            } catch let error as MAMError {
                guard case .keyUnavailable = error else { Issue.record("\(error)"); return }
            }
            #expect(f.context.withheldAccounts == [Self.bobId] && !f.context.holdsMasterKey)
            #expect(throws: MAMError.self) { try f.plaintext(bob) }
        }
        try f.context.restoreKeys(passphraseFile: right)
        #expect(try f.plaintext(bob) == Array("bob's work".utf8))
    }

    @Test("while withheld, a state change by another process keeps the kept account's cached keys, but a key that process destroyed is gone")
    func invalidateWhileWithheld() throws {
        let (f, alice, _) = try Self.twoAccounts()
        try f.context.withholdKeys(of: [Self.bobId])
        let other = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        try other.enrollment.enroll(accountId: Self.bobId, upn: "bob@contoso.com", policy: Policy(fileEncryptionRequired: false))
        #expect(f.context.refreshIfChanged())
        #expect(try f.plaintext(alice) == Array("alice's work".utf8))
        _ = try other.keys.destroyKeys(accountId: StateFixture.managedId)
        #expect(f.context.refreshIfChanged())
        #expect(throws: MAMError.self) { try f.plaintext(alice) }
    }
}
