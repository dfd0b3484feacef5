import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// The memo of the last partial block a write merged (`BlockCipher+Memo.swift`): an append
/// takes the old block's plaintext from it only when the bytes on disk are exactly the ones
/// sealed, so anything else on disk is opened and authenticated as before.
@Suite("Memo of the last sealed block")
struct SealedBlockMemoTests {
    /// A new encrypted file of `appends` appends of 100 bytes each, with its key and fileId.
    struct Appended {
        let dir: TempDirectory
        let file: BackingFile
        let content: ProtectedFileContent
        let fileKey: SymmetricKey
        let fileId: [UInt8]
        let accountKey: SymmetricKey
        var expected: [UInt8] = []

        init(appends: Int) throws {
            dir = try TempDirectory()
            file = try BackingFile(path: dir.file("m"))
            accountKey = try SymmetricKey.random()
            content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: accountKey)
            fileKey = try #require(content.fileKey)
            fileId = try #require(content.header?.encryption?.fileId)
            for round in 0..<appends { try append(round) }
        }

        mutating func append(_ round: Int) throws {
            let bytes = (0..<100).map { UInt8(truncatingIfNeeded: $0 * 7 + round) }
            try FormatFixture.write(content, bytes, at: Int64(expected.count))
            expected += bytes
        }

        /// The stored bytes of the file's last block as on disk.
        func lastStoredBlock() throws -> (index: Int64, bytes: [UInt8]) {
            let stored = try FormatFixture.readFile(dir.file("m"))
            let index = Int64((expected.count - 1) / BlockLayout.plaintextBlockSize)
            let start = Int(content.dataOffset) + Int(index) * BlockLayout.storedBlockSize
            return (index, Array(stored[start...]))
        }

        /// The file's plaintext as a new reader (another key object, another cipher) reads it.
        func reread() throws -> [UInt8] {
            try FormatFixture.readAll(try FormatFixture.reopen(file, accountKey: accountKey))
        }

        /// Replaces the backing file's bytes in place (the content's descriptor stays on it).
        func overwrite(_ bytes: [UInt8]) throws {
            #expect(ftruncate(file.fd, off_t(bytes.count)) == 0)
            #expect(bytes.withUnsafeBytes { pwrite(file.fd, $0.baseAddress, bytes.count, 0) } == bytes.count)
        }

        /// Runs `body` on the kept cipher (taken and kept again).
        func withKeptCipher<R>(_ body: (BlockCipher) throws -> R) throws -> R {
            let cipher = try BlockCipher.take(key: fileKey, fileId: fileId)
            defer { BlockCipher.keep(cipher, with: fileKey) }
            return try body(cipher)
        }
    }

    @Test("a file written in one call keeps no memo; appends that merge the last block keep its exact bytes")
    func appendsKeepTheLastBlock() throws {
        var file = try Appended(appends: 1)
        #expect(try file.withKeptCipher { $0.sealedMemo } == nil, "a write that merged nothing recorded a memo")
        try file.append(1)
        #expect(try file.withKeptCipher { $0.sealedMemo } == nil, "the first merge into a block made the memo's buffers")
        for round in 2..<5 { try file.append(round) }
        let (index, stored) = try file.lastStoredBlock()
        let recalled = try file.withKeptCipher { cipher -> [UInt8]? in
            var plain = [UInt8](repeating: 0, count: BlockLayout.plaintextBlockSize)
            let hit = stored.withUnsafeBytes { s in plain.withUnsafeMutableBytes { cipher.recallSealed(index: index, stored: s, into: $0.baseAddress!) } }
            return hit ? Array(plain.prefix(stored.count - BlockLayout.overhead)) : nil
        }
        #expect(recalled == file.expected, "the memo holds the last block's plaintext")
        // Any other bytes, or another index, miss it.
        var changed = stored
        changed[AESGCM.nonceSize + 3] ^= 1
        let misses = try file.withKeptCipher { cipher in
            var plain = [UInt8](repeating: 0, count: BlockLayout.plaintextBlockSize)
            return plain.withUnsafeMutableBytes { p in
                [changed.withUnsafeBytes { cipher.recallSealed(index: index, stored: $0, into: p.baseAddress!) },
                 stored.withUnsafeBytes { cipher.recallSealed(index: index + 1, stored: $0, into: p.baseAddress!) },
                 stored.dropLast().withUnsafeBytes { cipher.recallSealed(index: index, stored: UnsafeRawBufferPointer($0), into: p.baseAddress!) }]
            }
        }
        #expect(misses == [false, false, false])
    }

    @Test("an append takes the merged block from the memo (a memo changed in memory shows in the file)")
    func appendUsesTheMemo() throws {
        var file = try Appended(appends: 3)
        try file.withKeptCipher { cipher in
            let memo = try #require(cipher.sealedMemo)
            memo.plain.baseAddress!.storeBytes(of: 0xEE, as: UInt8.self)
        }
        try file.append(3)
        let read = try file.reread()
        #expect(read.first == 0xEE, "the append opened the block instead of using the memo")
        #expect(Array(read.dropFirst()) == Array(file.expected.dropFirst()))
    }

    @Test("a block changed on disk after the memo is opened and authenticated: a flipped byte fails the append, an older seal is merged")
    func changedBlockMissesTheMemo() throws {
        var file = try Appended(appends: 3)
        let older = try file.lastStoredBlock()
        let olderExpected = file.expected
        try file.append(3)
        try file.append(4)
        let path = file.dir.file("m")
        let blockStart = Int(file.content.dataOffset) + Int(older.index) * BlockLayout.storedBlockSize
        // A flipped ciphertext byte: the append fails authentication and writes nothing.
        var bytes = try FormatFixture.readFile(path)
        let intact = bytes
        bytes[blockStart + AESGCM.nonceSize + 5] ^= 0x40
        try file.overwrite(bytes)
        #expect(FormatFixture.isAuthenticationFailure { try FormatFixture.write(file.content, [1, 2, 3], at: Int64(file.expected.count)) })
        #expect(try FormatFixture.readFile(path) == bytes, "a failed append changed the file")
        // An older authentic seal of the block (the file cut back to it): merged as stored.
        try file.overwrite(Array(intact[..<blockStart]) + older.bytes)
        let tail: [UInt8] = [9, 8, 7]
        try FormatFixture.write(file.content, tail, at: Int64(olderExpected.count))
        let read = try file.reread()
        #expect(read == olderExpected + tail)
    }

    @Test("a cipher taken for another fileId drops the memo; a shorter memo leaves none of the longer one's bytes")
    func memoFollowsTheFileId() throws {
        var file = try Appended(appends: 30)
        // 3,000 bytes in block 0; rewrite a shorter file's last block through the memo's setter.
        try file.withKeptCipher { cipher in
            let memo = try #require(cipher.sealedMemo)
            #expect(memo.plainLength == 3000)
            let short = [UInt8](repeating: 0x42, count: 10)
            let stored = [UInt8](repeating: 0x17, count: 10 + BlockLayout.overhead)
            short.withUnsafeBytes { p in stored.withUnsafeBytes { cipher.rememberSealed(index: 0, plaintext: p, stored: $0) } }
            let plain = Array(memo.plain)
            #expect(Array(plain[..<10]) == short)
            #expect(plain[10..<3000].allSatisfy { $0 == 0 }, "the longer memo's plaintext is left past the shorter one")
        }
        let other = [UInt8](repeating: 0x99, count: file.fileId.count)
        let cipher = try BlockCipher.take(key: file.fileKey, fileId: other)
        #expect(cipher.sealedMemo == nil)
        BlockCipher.keep(cipher, with: file.fileKey)
        try file.append(30)
        #expect(try FormatFixture.readAll(file.content) == file.expected)
    }
}
