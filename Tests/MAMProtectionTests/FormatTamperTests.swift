import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// Tampering with an encrypted file must give MAMError.authenticationFailed, never other bytes.
@Suite("Format tamper detection")
struct FormatTamperTests {
    /// An encrypted file of 2 full blocks + 1000 bytes, owner FormatFixture.owner (L = 36, H = 129).
    struct Sample {
        let dir: TempDirectory
        let accountKey: SymmetricKey
        let plaintext: [UInt8]
        let stored: [UInt8]
        let header: ProtectedFileHeader
        let fileKey: SymmetricKey

        init(seed: UInt64 = 11, size: Int = 2 * 4096 + 1000, accountKey: SymmetricKey? = nil, fileKey: SymmetricKey? = nil) throws {
            dir = try TempDirectory()
            self.accountKey = try accountKey ?? SymmetricKey.random()
            var rng = SplitMix64(seed: seed)
            plaintext = FormatFixture.randomBytes(size, using: &rng)
            let key = try fileKey ?? SymmetricKey.random()
            header = try ProtectedFileHeader(owner: FormatFixture.owner, keyId: 1, fileId: try SecureRandom.bytes(16),
                                             fileKey: key, accountKey: self.accountKey)
            self.fileKey = key
            let file = try BackingFile(path: dir.file("original"))
            defer { withExtendedLifetime(file) {} }
            let content = try ProtectedFileContent(fd: file.fd, header: header, fileKey: key)
            try FormatFixture.write(content, plaintext, at: 0)
            stored = try FormatFixture.readFile(file.path)
        }

        var headerLength: Int { header.length }
        var blockStarts: [Int] { stride(from: headerLength, to: stored.count, by: BlockLayout.storedBlockSize).map { $0 } }

        /// Writes `bytes` as a new file and reads it back as a reader would (header, unwrap, all blocks).
        func open(_ bytes: [UInt8], key: SymmetricKey? = nil) throws -> [UInt8] {
            let path = dir.file("tampered-\(UUID().uuidString)")
            try FormatFixture.writeFile(path, bytes)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let file = try BackingFile(path: path)
            defer { withExtendedLifetime(file) {} }
            let content = try FormatFixture.reopen(file, accountKey: key ?? accountKey)
            return try FormatFixture.readAll(content)
        }

        /// True when reading `bytes` fails with authenticationFailed; records an issue naming `what` otherwise.
        func rejects(_ bytes: [UInt8], _ what: String) -> Bool {
            do {
                let got = try open(bytes)
                Issue.record("\(what): read \(got.count) bytes, \(got == plaintext ? "the original plaintext" : "other bytes") instead of an authentication failure")
                return false
            } catch MAMError.authenticationFailed {
                return true
            } catch {
                Issue.record("\(what): \(error) instead of an authentication failure")
                return false
            }
        }
    }

    @Test("the untampered sample reads back (so the rejections below mean something)")
    func sampleReads() throws {
        let sample = try Sample()
        #expect(try sample.open(sample.stored) == sample.plaintext)
        #expect(sample.headerLength == 129)
        #expect(sample.stored.count == 129 + 2 * 4124 + 1028)
    }

    /// Byte ranges of each header field of the sample (owner length 36).
    static let headerFields: [(String, Range<Int>)] = [
        ("version", 8..<9), ("flags", 9..<10), ("header length", 10..<12), ("owner length", 12..<13),
        ("owner", 13..<49), ("key id", 49..<53), ("file id", 53..<69), ("wrap nonce", 69..<81),
        ("wrapped key", 81..<113), ("wrap tag", 113..<129),
    ]

    @Test("every bit of every header field after the magic is authenticated",
          arguments: FormatTamperTests.headerFields.map { $0.0 })
    func headerBitFlips(field: String) throws {
        let sample = try Sample()
        let range = try #require(Self.headerFields.first { $0.0 == field }?.1)
        for position in range {
            for bit in 0..<8 {
                var bytes = sample.stored
                bytes[position] ^= UInt8(1) << bit
                if !sample.rejects(bytes, "\(field) byte \(position) bit \(bit)") { return }
            }
        }
    }

    @Test("a flipped bit in the magic makes the file untagged: raw ciphertext, never plaintext")
    func magicBitFlips() throws {
        let sample = try Sample()
        let probe = Array(sample.plaintext[100..<132])
        for position in 0..<8 {
            for bit in 0..<8 {
                var bytes = sample.stored
                bytes[position] ^= UInt8(1) << bit
                let decoded = try bytes.withUnsafeBytes { try ProtectedFileHeader.decode($0) }
                #expect(decoded == nil, "magic byte \(position) bit \(bit) still parses as a header")
                let got = try sample.open(bytes)
                // Untagged content is passed through: the reader sees the stored bytes themselves.
                #expect(got == bytes)
                #expect(!Self.contains(got, probe), "plaintext visible after flipping magic byte \(position)")
            }
        }
    }

    @Test("every block nonce, ciphertext and tag byte class is authenticated")
    func bodyBitFlips() throws {
        let sample = try Sample()
        let starts = sample.blockStarts
        #expect(starts.count == 3)
        for (index, start) in starts.enumerated() {
            let end = min(start + BlockLayout.storedBlockSize, sample.stored.count)
            let ciphertextEnd = end - AESGCM.tagSize
            let positions: [(String, Int)] = [
                ("nonce first", start), ("nonce last", start + 11),
                ("ciphertext first", start + 12), ("ciphertext middle", (start + 12 + ciphertextEnd) / 2),
                ("ciphertext last", ciphertextEnd - 1),
                ("tag first", ciphertextEnd), ("tag last", end - 1),
            ]
            for (what, position) in positions {
                for bit in [0, 3, 7] {
                    var bytes = sample.stored
                    bytes[position] ^= UInt8(1) << bit
                    _ = sample.rejects(bytes, "block \(index) \(what) (byte \(position)) bit \(bit)")
                }
            }
        }
    }

    @Test("a single corrupted block makes a read of only that block fail, and reads of others still work")
    func corruptionIsLocal() throws {
        let sample = try Sample()
        var bytes = sample.stored
        bytes[sample.blockStarts[1] + 500] ^= 0x10
        let path = sample.dir.file("local")
        try FormatFixture.writeFile(path, bytes)
        let file = try BackingFile(path: path)
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.reopen(file, accountKey: sample.accountKey)
        #expect(try FormatFixture.read(content, at: 0, count: 4096) == Array(sample.plaintext[0..<4096]))
        #expect(try FormatFixture.read(content, at: 8192, count: 1000) == Array(sample.plaintext[8192...]))
        #expect(FormatFixture.isAuthenticationFailure { _ = try FormatFixture.read(content, at: 4096, count: 1) })
        #expect(FormatFixture.isAuthenticationFailure { _ = try FormatFixture.read(content, at: 4000, count: 200) })
        // A write that must merge with the corrupted block fails too, rather than re-encrypting garbage.
        #expect(FormatFixture.isAuthenticationFailure { try FormatFixture.write(content, [1], at: 5000) })
    }

    @Test("swapping two full blocks is detected")
    func swapBlocks() throws {
        let sample = try Sample()
        let s = sample.blockStarts
        let b0 = Array(sample.stored[s[0]..<s[1]])
        let b1 = Array(sample.stored[s[1]..<s[2]])
        let swapped = Array(sample.stored[0..<s[0]]) + b1 + b0 + Array(sample.stored[s[2]...])
        _ = sample.rejects(swapped, "blocks 0 and 1 swapped")
    }

    @Test("reordering blocks (full block moved to the end, short block moved forward) is detected")
    func reorderBlocks() throws {
        let sample = try Sample()
        let s = sample.blockStarts
        let header = Array(sample.stored[0..<s[0]])
        let b0 = Array(sample.stored[s[0]..<s[1]])
        let b1 = Array(sample.stored[s[1]..<s[2]])
        let b2 = Array(sample.stored[s[2]...])
        _ = sample.rejects(header + b1 + b2 + b0, "order 1 2 0")
        _ = sample.rejects(header + b0 + b0 + b2, "block 0 duplicated at index 1")
        // The short last block moved to a full-block position gives an invalid length or a failed tag.
        _ = sample.rejects(header + b2 + b0 + b1, "order 2 0 1")
    }

    @Test("a block from another file encrypted under the same account key is rejected")
    func blockFromAnotherFile() throws {
        let accountKey = try SymmetricKey.random()
        let a = try Sample(seed: 21, accountKey: accountKey)
        let b = try Sample(seed: 22, accountKey: accountKey)
        let s = a.blockStarts
        let mixed = Array(a.stored[0..<s[1]]) + Array(b.stored[s[1]..<s[2]]) + Array(a.stored[s[2]...])
        _ = a.rejects(mixed, "block 1 from another file")
    }

    @Test("a block from another file with the same file key but another file id is rejected")
    func blockFromFileWithSameFileKey() throws {
        let accountKey = try SymmetricKey.random()
        let fileKey = try SymmetricKey.random()
        let a = try Sample(seed: 31, accountKey: accountKey, fileKey: fileKey)
        let b = try Sample(seed: 32, accountKey: accountKey, fileKey: fileKey)
        #expect(a.header.encryption?.fileId != b.header.encryption?.fileId)
        let s = a.blockStarts
        let mixed = Array(a.stored[0..<s[1]]) + Array(b.stored[s[1]..<s[2]]) + Array(a.stored[s[2]...])
        _ = a.rejects(mixed, "block 1 from a file with the same file key")
    }

    @Test("a header from another file (same owner, same account key) is rejected")
    func headerFromAnotherFile() throws {
        let accountKey = try SymmetricKey.random()
        let a = try Sample(seed: 41, accountKey: accountKey)
        let b = try Sample(seed: 42, accountKey: accountKey)
        let mixed = Array(b.stored[0..<b.headerLength]) + Array(a.stored[a.headerLength...])
        _ = a.rejects(mixed, "header of file b on the body of file a")
    }

    @Test("the wrong account key is an authentication failure")
    func wrongAccountKey() throws {
        let sample = try Sample()
        #expect(FormatFixture.isAuthenticationFailure { _ = try sample.open(sample.stored, key: try SymmetricKey.random()) })
    }

    @Test("truncation inside a block is detected: invalid stored length or failed tag")
    func truncateInsideBlock() throws {
        let sample = try Sample()
        let s = sample.blockStarts
        let cuts = [s[2] + 1, s[2] + 28, s[2] + 29, s[2] + 500, sample.stored.count - 1,
                    s[1] + 1, s[1] + 28, s[1] + 29, s[1] + 4123, s[0] + 100, 128, 100, 13]
        for cut in cuts {
            _ = sample.rejects(Array(sample.stored[0..<cut]), "truncated to \(cut) stored bytes")
        }
    }

    @Test("appended garbage is detected", arguments: [1, 28, 29, 100, 4096, 4124, 4124 + 29])
    func appendGarbage(count: Int) throws {
        let sample = try Sample()
        var rng = SplitMix64(seed: UInt64(count))
        _ = sample.rejects(sample.stored + FormatFixture.randomBytes(count, using: &rng), "\(count) bytes appended")
        // Also after a file that ends exactly at a block boundary.
        let aligned = try Sample(seed: 12, size: 2 * 4096)
        _ = aligned.rejects(aligned.stored + FormatFixture.randomBytes(count, using: &rng), "\(count) bytes appended to an aligned file")
    }

    // MARK: What the format does NOT detect (documented in docs/FORMAT.md); these pin the behaviour.

    @Test("NOT detected: truncation at a block boundary reads as a shorter file")
    func truncateAtBoundaryUndetected() throws {
        let sample = try Sample()
        let s = sample.blockStarts
        #expect(try sample.open(Array(sample.stored[0..<s[2]])) == Array(sample.plaintext[0..<8192]))
        #expect(try sample.open(Array(sample.stored[0..<s[1]])) == Array(sample.plaintext[0..<4096]))
        #expect(try sample.open(Array(sample.stored[0..<s[0]])) == [])
    }

    @Test("NOT detected: an older version of a block at the same index of the same file")
    func blockRollbackUndetected() throws {
        let sample = try Sample()
        let path = sample.dir.file("rollback")
        try FormatFixture.writeFile(path, sample.stored)
        let file = try BackingFile(path: path)
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.reopen(file, accountKey: sample.accountKey)
        try FormatFixture.write(content, [UInt8](repeating: 0x42, count: 10), at: 4096 + 7)
        var newer = try FormatFixture.readFile(path)
        let s = sample.blockStarts
        newer.replaceSubrange(s[1]..<s[2], with: sample.stored[s[1]..<s[2]])
        #expect(try sample.open(newer) == sample.plaintext)
    }

    @Test("NOT detected: a truncated-away last block put back (same file, same index)")
    func appendOldBlockUndetected() throws {
        let sample = try Sample(seed: 13, size: 3 * 4096)
        let s = sample.blockStarts
        let truncated = Array(sample.stored[0..<s[2]])
        #expect(try sample.open(truncated + Array(sample.stored[s[2]...])) == sample.plaintext)
    }
}

extension FormatTamperTests {
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}
