import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// The block cipher kept with a file key between reads and writes (`BlockCipher.take`/`keep`):
/// every block still gets a nonce of its own, the AAD names the file being written, and a
/// forked child never takes a nonce its parent takes.
@Suite("Block cipher kept between calls")
struct KeptBlockCipherTests {
    /// The nonce of stored block `index` in the backing file at `path`.
    static func nonce(_ path: String, dataOffset: Int64, index: Int) throws -> [UInt8] {
        let stored = try FormatFixture.readFile(path)
        let start = Int(dataOffset) + index * BlockLayout.storedBlockSize
        return Array(stored[start..<start + AESGCM.nonceSize])
    }

    @Test("writes of one block each, and rewrites of one block, never repeat a nonce across pool refills")
    func noncesStayUniqueAcrossCalls() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let path = dir.file("f")
        let file = try BackingFile(path: path)
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        let fileKey = try #require(content.fileKey)
        var rng = SplitMix64(seed: 21)
        let blocks = 3 * BlockCipher.noncePoolCapacity + 5
        var expected: [UInt8] = []
        var nonces = Set<[UInt8]>()
        for index in 0..<blocks {
            let block = FormatFixture.randomBytes(BlockLayout.plaintextBlockSize, using: &rng)
            try FormatFixture.write(content, block, at: Int64(index * BlockLayout.plaintextBlockSize))
            expected += block
            #expect(fileKey.keepsBlockCipher, "the cipher is kept after write \(index)")
        }
        for index in 0..<blocks { nonces.insert(try Self.nonce(path, dataOffset: content.dataOffset, index: index)) }
        #expect(nonces.count == blocks)
        // The same block sealed again and again: a new nonce each time, never an earlier one.
        for round in 0..<(2 * BlockCipher.noncePoolCapacity + 3) {
            let bytes = FormatFixture.randomBytes(100, using: &rng)
            try FormatFixture.write(content, bytes, at: 7)
            expected.replaceSubrange(7..<107, with: bytes)
            let n = try Self.nonce(path, dataOffset: content.dataOffset, index: 0)
            #expect(nonces.insert(n).inserted, "rewrite \(round) reused a nonce")
        }
        let reread = try FormatFixture.reopen(file, accountKey: key)
        #expect(try FormatFixture.readAll(reread) == expected)
    }

    @Test("a kept cipher taken for another file id seals with that id in the AAD")
    func keptCipherTakesTheNewFileId() throws {
        let key = try SymmetricKey.random()
        let first = [UInt8](repeating: 0x11, count: 16)
        let second = [UInt8](repeating: 0x22, count: 16)
        let plain = [UInt8](repeating: 0x5A, count: 300)
        var stored = [UInt8](repeating: 0, count: plain.count + BlockLayout.overhead)
        let cipher = try BlockCipher.take(key: key, fileId: first)
        BlockCipher.keep(cipher, with: key)
        let again = try BlockCipher.take(key: key, fileId: second)
        #expect(again === cipher)
        try plain.withUnsafeBytes { p in
            try stored.withUnsafeMutableBytes { try again.seal(index: 3, plaintext: p, into: $0.baseAddress!) }
        }
        BlockCipher.keep(again, with: key)
        var opened = [UInt8](repeating: 0, count: plain.count)
        try stored.withUnsafeBytes { s in
            try opened.withUnsafeMutableBytes { try BlockCipher(key: key, fileId: second).open(index: 3, stored: s, into: $0.baseAddress!) }
        }
        #expect(opened == plain)
        #expect(FormatFixture.isAuthenticationFailure {
            try stored.withUnsafeBytes { s in
                try opened.withUnsafeMutableBytes { try BlockCipher(key: key, fileId: first).open(index: 3, stored: s, into: $0.baseAddress!) }
            }
        })
    }

    @Test("a second taker gets a cipher of its own; forgetBlockCipher drops the kept one")
    func takersNeverShareACipher() throws {
        let key = try SymmetricKey.random()
        let fileId = [UInt8](repeating: 0x33, count: 16)
        let a = try BlockCipher.take(key: key, fileId: fileId)
        let b = try BlockCipher.take(key: key, fileId: fileId)
        #expect(a !== b)
        BlockCipher.keep(a, with: key)
        BlockCipher.keep(b, with: key)
        #expect(key.keepsBlockCipher)
        #expect(try BlockCipher.take(key: key, fileId: fileId) === a)
        BlockCipher.keep(a, with: key)
        key.forgetBlockCipher()
        #expect(!key.keepsBlockCipher)
        #expect(try BlockCipher.take(key: key, fileId: fileId) !== a)
    }

    @Test("a forked child draws nonces of its own instead of the parent's pool")
    func forkedChildDrawsItsOwnNonces() throws {
        let key = try SymmetricKey.random()
        let fileId = [UInt8](repeating: 0x44, count: 16)
        let plain = [UInt8](repeating: 1, count: 64)
        func sealOnce(expecting blocks: Int = 1) throws -> [UInt8] {
            var stored = [UInt8](repeating: 0, count: plain.count + BlockLayout.overhead)
            let cipher = try BlockCipher.take(key: key, fileId: fileId)
            defer { BlockCipher.keep(cipher, with: key) }
            try cipher.expectBlocks(blocks)
            try plain.withUnsafeBytes { p in
                try stored.withUnsafeMutableBytes { try cipher.seal(index: 0, plaintext: p, into: $0.baseAddress!) }
            }
            return Array(stored.prefix(AESGCM.nonceSize))
        }
        // Leaves seven nonces in the kept cipher's pool: without the fork check the child
        // would take the very nonce the parent takes next.
        _ = try sealOnce(expecting: 8)
        let child = ForkedChild.run { try? sealOnce() }
        #expect(child.status == 0, "the child's seal failed (wait status \(child.status))")
        #expect(child.bytes.count == AESGCM.nonceSize)
        let inParent = try sealOnce()
        #expect(child.bytes != inParent, "the child took the parent's next nonce")
    }

    /// The kept cipher's staging block, taken and handed back (nil: none made yet).
    static func stagingBytes(_ key: SymmetricKey, fileId: [UInt8]) throws -> [UInt8]? {
        let cipher = try BlockCipher.take(key: key, fileId: fileId)
        defer { BlockCipher.keep(cipher, with: key) }
        return cipher.stagingBuffer.map { Array($0) }
    }

    @Test("partial-block writes and reads merge in the kept cipher's staging block and leave no plaintext there")
    func stagingBlockIsWipedAfterEachCall() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("s"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        let fileKey = try #require(content.fileKey)
        let fileId = try #require(content.header?.encryption?.fileId)
        let secret = Array("staging-secret-".utf8)
        var expected: [UInt8] = []
        // Appends of 100 bytes: every one after the first merges the old partial block.
        for round in 0..<60 {
            let bytes = (0..<100).map { secret[($0 + round) % secret.count] }
            try FormatFixture.write(content, bytes, at: Int64(expected.count))
            expected += bytes
        }
        let afterWrites = try #require(try Self.stagingBytes(fileKey, fileId: fileId), "partial blocks were staged")
        // One of the appends filled block 0 (4,096 bytes staged, all wiped); the last staged 1,904.
        #expect(afterWrites.count == BlockLayout.plaintextBlockSize)
        #expect(afterWrites.allSatisfy { $0 == 0 }, "plaintext left in the staging block after the writes")
        // A read of part of a block opens it in the staging block too.
        #expect(try FormatFixture.read(content, at: 4100, count: 700) == Array(expected[4100..<4800]))
        let afterRead = try #require(try Self.stagingBytes(fileKey, fileId: fileId))
        #expect(afterRead.allSatisfy { $0 == 0 }, "plaintext left in the staging block after the read")
        #expect(try FormatFixture.readAll(try FormatFixture.reopen(file, accountKey: key)) == expected)
        // A partial read of a block that fails authentication leaves nothing staged either.
        var byte: UInt8 = 0
        let at = off_t(content.dataOffset) + off_t(BlockLayout.storedBlockSize + AESGCM.nonceSize + 10)
        #expect(pread(file.fd, &byte, 1, at) == 1)
        byte ^= 0xFF
        #expect(pwrite(file.fd, &byte, 1, at) == 1)
        #expect(throws: MAMError.self) { _ = try FormatFixture.read(content, at: 4100, count: 700) }
        let afterFailure = try #require(try Self.stagingBytes(fileKey, fileId: fileId))
        #expect(afterFailure.allSatisfy { $0 == 0 }, "plaintext left in the staging block after a failed read")
    }
}
