import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

@Suite("Security: wipe races, scrypt cost, block splicing")
struct SecurityLibraryTests {
    @Test("a parent swapped for a symlink between reading a header and removing the file: the file elsewhere stays")
    func wipeRaceWithSwappedParent() throws {
        let f = try StateFixture()
        let mine = try f.write("tree/sub/f.txt", Array("work".utf8))
        let victim = try f.write("outside/f.txt", Array("root only".utf8))
        try f.context.files.encryptFile(path: mine, forAccountId: StateFixture.managedId)
        try f.context.files.encryptFile(path: victim, forAccountId: StateFixture.managedId)
        chmod(victim, 0o600)
        let sub = f.path("tree/sub")
        let outside = f.path("outside")
        EnrollmentManager.beforeRemovingFile = { name in
            // Only this test's tree: other tests may wipe at the same time.
            guard name == "f.txt", FileManager.default.fileExists(atPath: sub + "/f.txt"),
                  (try? FileManager.default.destinationOfSymbolicLink(atPath: sub)) == nil else { return }
            rename(sub, sub + ".moved")
            symlink(outside, sub)
        }
        defer { EnrollmentManager.beforeRemovingFile = nil }
        let report = try f.context.enrollment.wipe(StateFixture.managedId, roots: [f.path("tree")])
        #expect(FileManager.default.fileExists(atPath: victim), "the wipe removed a file outside its root")
        #expect(!FileManager.default.fileExists(atPath: sub + ".moved/f.txt"), "the file that was examined is removed")
        #expect(report.removedFiles == 1)
    }

    @Test("new passphrase states use scrypt N >= 2^17, r = 8, p = 1")
    func scryptCostForNewState() throws {
        let fresh = try ScryptParameters.fresh()
        #expect(fresh.n >= 1 << 17)
        #expect(fresh.r == 8 && fresh.p == 1)
        let dir = try TempDirectory()
        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: dir.file("pass")))
        let state = StateDirectory(path: dir.file("state"))
        let context = try ProtectionContext.initialize(stateDirectory: state, passphraseFile: dir.file("pass"))
        let stored = try #require(try context.state.metaValue(MasterKey.scryptMetaKey))
        let parameters = try JSONDecoder().decode(ScryptParameters.self, from: stored)
        #expect(parameters.n >= 1 << 17)
        #expect(parameters.r == 8 && parameters.p == 1)
    }

    @Test("a state made with the old cost N = 2^16 still opens (the parameters are stored)")
    func oldScryptStateOpens() throws {
        let dir = try TempDirectory()
        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: dir.file("pass")))
        let state = StateDirectory(path: dir.file("state"))
        let created = try ProtectionContext.initialize(stateDirectory: state, passphraseFile: dir.file("pass"))
        let old = ScryptParameters(n: 1 << 16, r: 8, p: 1, salt: try SecureRandom.bytes(32))
        let key = try old.deriveKey(passphrase: Array("correct horse".utf8))
        try created.state.setMetaValue(try JSONEncoder().encode(old), forKey: MasterKey.scryptMetaKey)
        try created.state.setMetaValue(Data(try AESGCM(key: key).seal(MasterKey.checkPlaintext, aad: MasterKey.checkAAD)),
                                       forKey: MasterKey.checkMetaKey)
        created.state.close()
        let reopened = try ProtectionContext.open(stateDirectory: state, passphraseFile: dir.file("pass"))
        try reopened.enrollment.enroll(accountId: StateFixture.managedId, upn: nil, policy: .demoEncrypting)
        let sealed = try reopened.data.protect(Data("old state".utf8), accountId: StateFixture.managedId)
        #expect(try reopened.data.unprotect(sealed) == Data("old state".utf8))
    }

    /// The stored bytes of block `index` of an encrypted file.
    func storedBlock(_ path: String, _ index: Int) throws -> [UInt8] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let header = try #require(try bytes.withUnsafeBytes { try ProtectedFileHeader.decode($0) })
        let start = header.length + index * 4124
        return Array(bytes[start..<(start + 4124)])
    }

    func replaceBlock(_ path: String, _ index: Int, with block: [UInt8]) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let header = try #require(try bytes.withUnsafeBytes { try ProtectedFileHeader.decode($0) })
        let start = header.length + index * 4124
        bytes.replaceSubrange(start..<(start + 4124), with: block)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("a block spliced between byte-copies of one file is accepted; between separately encrypted files it fails")
    func blockSplicingBetweenCopies() throws {
        let f = try StateFixture()
        let original = randomBytes(3 * 4096, seed: 7)
        let a = try f.write("a.bin", original)
        try f.context.files.encryptFile(path: a, forAccountId: StateFixture.managedId)
        let b = f.path("b.bin")
        try FileManager.default.copyItem(atPath: a, toPath: b)
        // The copy is changed through the library: its block 0 now holds other plaintext.
        let changed = [UInt8](repeating: 0x42, count: 4096)
        let fd = open(b, O_RDWR)
        try #require(fd >= 0)
        let content = try f.context.openContent(fd: fd)
        try changed.withUnsafeBytes { try content.write($0, at: 0) }
        close(fd)

        // Same file id and file key: the copy's block authenticates in the original.
        try replaceBlock(a, 0, with: try storedBlock(b, 0))
        #expect(try f.plaintext(a) == changed + Array(original[4096...]))

        // A separately encrypted file of the same plaintext has its own file id and key.
        let c = try f.write("c.bin", original)
        try f.context.files.encryptFile(path: c, forAccountId: StateFixture.managedId)
        try replaceBlock(a, 1, with: try storedBlock(c, 1))
        #expect {
            _ = try f.plaintext(a)
        } throws: { error in
            if case MAMError.authenticationFailed = error { return true }
            return false
        }
    }
}
