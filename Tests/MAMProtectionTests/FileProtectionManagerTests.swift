import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

@Suite("FileProtectionManager")
struct FileProtectionManagerTests {
    @Test("encryptFile then decryptFile round-trips the bytes and the ciphertext hides them",
          arguments: [0, 1, 4095, 4096, 4097, 3 * 1024 * 1024 + 17])
    func encryptDecryptRoundTrip(size: Int) throws {
        let f = try StateFixture()
        let bytes = randomBytes(size, seed: UInt64(size))
        let p = try f.write("a.bin", bytes)
        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedId)
        let info = try f.context.files.info(path: p)
        #expect(info.owner == StateFixture.managedId)
        #expect(info.encrypted)
        #expect(info.size == Int64(size))
        #expect(info.storedSize == ProtectedFileContent.storedSize(plaintextSize: Int64(size), header: try ProtectedFileHeader.read(fd: open(p, O_RDONLY))))
        if size >= 64 {
            let stored = try f.read(p)
            #expect(!Data(stored).contains(Data(bytes[0..<64])))
        }
        #expect(try f.plaintext(p) == bytes)
        try f.context.files.decryptFile(path: p)
        #expect(try f.read(p) == bytes)
        #expect(try f.context.files.protectionInfo(path: p) == nil)
        #expect(f.filesInTemp(of: f.work).isEmpty)
    }

    @Test("decryptFile to a copy path leaves the original encrypted")
    func decryptToCopy() throws {
        let f = try StateFixture()
        let bytes = randomBytes(10_000)
        let p = try f.write("doc.txt", bytes)
        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedUPN.uppercased())
        let before = try f.read(p)
        let copy = f.path("copy.txt")
        try f.context.files.decryptFile(path: p, toCopyPath: copy)
        #expect(try f.read(copy) == bytes)
        #expect(try f.read(p) == before)
        #expect(try f.context.files.isFileEncrypted(path: p))
    }

    @Test("encryptFile refuses unmanaged accounts, directories and missing files with the reference error codes")
    func encryptErrors() throws {
        let f = try StateFixture()
        let p = try f.write("x", [1, 2, 3])
        #expect(throws: MAMError.unmanagedIdentity("'\(StateFixture.otherId)' is not a managed (enrolled) account")) {
            try f.context.files.encryptFile(path: p, forAccountId: StateFixture.otherId)
        }
        #expect(throws: MAMError.unmanagedIdentity("'(empty)' is not a managed (enrolled) account")) {
            try f.context.files.encryptFile(path: p, forAccountId: "")
        }
        #expect(throws: MAMError.operationOnDirectory(f.work)) {
            try f.context.files.encryptFile(path: f.work, forAccountId: StateFixture.managedId)
        }
        #expect(throws: MAMError.fileNotFound(f.path("missing"))) {
            try f.context.files.encryptFile(path: f.path("missing"), forAccountId: StateFixture.managedId)
        }
        #expect(throws: MAMError.unknownAccount("'nobody@contoso.com' is not registered (see 'mamfs accounts')")) {
            try f.context.files.encryptFile(path: p, forAccountId: "nobody@contoso.com")
        }
        #expect(try f.read(p) == [1, 2, 3])
    }

    @Test("decryptFile of an untagged file is an error, not a silent no-op")
    func decryptUntagged() throws {
        let f = try StateFixture()
        let p = try f.write("plain", [9, 9])
        #expect(throws: MAMError.failedToDecrypt("\(p) is not a protected file")) {
            try f.context.files.decryptFile(path: p)
        }
        #expect(try f.read(p) == [9, 9])
    }

    @Test("protect follows the owner's policy: encrypted when required, plain-tagged for unmanaged identities")
    func protectFollowsPolicy() throws {
        let f = try StateFixture()
        let bytes = Array("quarterly numbers".utf8)
        let p = try f.write("f.txt", bytes)
        try f.context.files.protect(path: p, accountId: StateFixture.managedId)
        #expect(try f.context.files.isFileEncrypted(path: p))
        // A different (unenrolled) identity: plain, tagged with that identity.
        try f.context.files.protect(path: p, accountId: StateFixture.otherId)
        #expect(try f.context.files.isFileEncrypted(path: p) == false)
        #expect(try f.context.files.protectionInfo(path: p) == StateFixture.otherId)
        #expect(try f.plaintext(p) == bytes)
        // The empty identity: unmanaged, plain, tagged "".
        try f.context.files.protect(path: p, accountId: "")
        #expect(try f.context.files.protectionInfo(path: p) == "")
        #expect(try f.plaintext(p) == bytes)
        // Back to managed: encrypted again.
        try f.context.files.protect(path: p, accountId: StateFixture.managedUPN)
        #expect(try f.context.files.isFileEncrypted(path: p))
        #expect(try f.plaintext(p) == bytes)
    }

    @Test("an encrypted file protected for an owner whose policy no longer requires encryption is decrypted")
    func protectDecryptsWhenPolicyRelaxes() throws {
        let f = try StateFixture()
        let p = try f.write("f", Array("secret".utf8))
        try f.context.files.protect(path: p, accountId: StateFixture.managedId)
        #expect(try f.context.files.isFileEncrypted(path: p))
        var relaxed = Policy.demoEncrypting
        relaxed.fileEncryptionRequired = false
        try f.context.enrollment.setPolicy(StateFixture.managedId, relaxed)
        try f.context.files.protect(path: p, accountId: StateFixture.managedId)
        #expect(try f.context.files.isFileEncrypted(path: p) == false)
        #expect(try f.context.files.protectionInfo(path: p) == StateFixture.managedId)
        #expect(try f.plaintext(p) == Array("secret".utf8))
    }

    @Test("protecting a directory tags it, protects everything below, and new files inherit")
    func protectDirectoryRecursive() throws {
        let f = try StateFixture()
        try f.write("d/a.txt", Array("a".utf8))
        try f.write("d/sub/b.txt", Array("bb".utf8))
        let dir = f.path("d")
        var count = 0
        try f.context.files.protect(path: dir, accountId: StateFixture.managedId, recursive: true) { count = $0 }
        #expect(count == 2)
        #expect(try f.context.files.protectionInfo(path: dir) == StateFixture.managedId)
        #expect(try f.context.files.isFileEncrypted(path: dir + "/a.txt"))
        #expect(try f.context.files.isFileEncrypted(path: dir + "/sub/b.txt"))
        #expect(DirectoryOwner.inherited(path: dir + "/sub") == StateFixture.managedId)
        #expect(try f.context.state.knownRoots().contains { $0.path.hasSuffix("/work/d") })
        // Unprotect the tree: files become plain, tagged unmanaged.
        try f.context.files.protect(path: dir, accountId: "", recursive: true)
        #expect(try f.read(dir + "/sub/b.txt").suffix(2) == Array("bb".utf8))
        #expect(try f.context.files.isFileEncrypted(path: dir + "/sub/b.txt") == false)
    }

    @Test("verifyAndProtect does nothing when the owner is already right")
    func verifyAndProtect() throws {
        let f = try StateFixture()
        let p = try f.write("v", [1, 2, 3])
        try f.context.files.verifyAndProtect(path: p, accountId: StateFixture.managedId)
        let stored = try f.read(p)
        try f.context.files.verifyAndProtect(path: p, accountId: StateFixture.managedId.uppercased())
        #expect(try f.read(p) == stored)
    }

    @Test("a rewrite keeps mode and mtime and leaves no temp file")
    func rewriteKeepsAttributes() throws {
        let f = try StateFixture()
        let p = try f.write("m", [1, 2, 3])
        chmod(p, 0o640)
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        utimensat(AT_FDCWD, p, &times, 0)
        try f.context.files.protect(path: p, accountId: StateFixture.managedId)
        var st = stat()
        stat(p, &st)
        #expect(st.st_mode & 0o7777 == 0o640)
        #expect(st.st_mtim.tv_sec == 1_000_000_000)
        #expect(f.filesInTemp(of: f.work).isEmpty)
    }

    @Test("a failed rewrite (tampered source) leaves the original unchanged and no temp file")
    func failedRewriteIsAtomic() throws {
        let f = try StateFixture()
        let p = try f.write("t", randomBytes(9000))
        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedId)
        var stored = try f.read(p)
        stored[stored.count - 5] ^= 0x01
        try Data(stored).write(to: URL(fileURLWithPath: p))
        #expect(throws: MAMError.authenticationFailed("block 2 does not authenticate")) {
            try f.context.files.decryptFile(path: p, toCopyPath: f.path("out"))
        }
        #expect(throws: (any Error).self) { try f.context.files.decryptFile(path: p) }
        #expect(try f.read(p) == stored)
        #expect(!FileManager.default.fileExists(atPath: f.path("out")))
        #expect(f.filesInTemp(of: f.work).isEmpty)
    }

    @Test("canReceiveSharedFile by path uses the file's owner and the receiver's policy")
    func canReceiveSharedFile() throws {
        let f = try StateFixture() // demo policy: receiveData managedOnly
        let mine = try f.write("mine", [1])
        try f.context.files.protect(path: mine, accountId: StateFixture.managedId)
        let personal = try f.write("personal", [2])
        #expect(try f.context.files.canReceiveSharedFile(path: mine, receiver: StateFixture.managedId))
        #expect(try f.context.files.canReceiveSharedFile(path: personal, receiver: StateFixture.managedId) == false)
        #expect(try f.context.files.canReceiveSharedFile(path: personal, receiver: ""))
    }

    @Test("protect -R over a tree that contains the state directory skips it, and protecting inside it is refused")
    func protectSkipsStateDirectory() throws {
        let f = try StateFixture()
        try f.write("doc.txt", Array("work".utf8))
        let db = try f.read(f.stateDirectory.databaseURL.path)
        try f.context.files.protect(path: f.root, accountId: StateFixture.managedId, recursive: true)
        #expect(try f.context.files.isFileEncrypted(path: f.path("doc.txt")))
        #expect(try f.read(f.stateDirectory.databaseURL.path).prefix(16) == db.prefix(16))
        #expect(try ProtectedFileHeader.read(fd: open(f.stateDirectory.masterKeyURL.path, O_RDONLY)) == nil)
        _ = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        #expect(throws: MAMError.self) {
            try f.context.files.protect(path: f.stateDirectory.masterKeyURL.path, accountId: StateFixture.managedId)
        }
    }
}
