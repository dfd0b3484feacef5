import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// When a write past the end may skip its space reservation (`tailBlockHolds`): only when the
/// new bytes stay in the filesystem block that holds the file's last byte and that byte is data.
@Suite("Reservation skipped only inside the last, allocated block")
struct TailBlockReservationTests {
    /// Runs `body` on a new, empty encrypted file's content and its backing path.
    static func withEncryptedFile(_ body: (ProtectedFileContent, String) throws -> Void) throws {
        let dir = try TempDirectory()
        let file = try BackingFile(path: dir.file("f"))
        defer { withExtendedLifetime(file) {} }
        try body(try FormatFixture.makeContent(.encrypted, file: file, accountKey: try SymmetricKey.random()), dir.file("f"))
    }

    @Test("data at the tail: a range inside its block skips; one reaching the next block, an empty file or a hole does not")
    func tailBlockHolds() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("f"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        #expect(!content.tailBlockHolds(storedEnd: 0, end: 100, blockSize: 4096))
        var rng = SplitMix64(seed: 5)
        try FormatFixture.write(content, FormatFixture.randomBytes(1000, using: &rng), at: 0)
        let end = try FormatFixture.readFile(dir.file("f")).count
        let e = Int64(end)
        let inside: Int64 = e + 512
        #expect(content.tailBlockHolds(storedEnd: e, end: inside, blockSize: 4096))
        #expect(content.tailBlockHolds(storedEnd: e, end: 4096, blockSize: 4096))
        #expect(!content.tailBlockHolds(storedEnd: e, end: 4097, blockSize: 4096))
        #expect(!content.tailBlockHolds(storedEnd: e, end: e, blockSize: 4096))
        // The same file grown by a hole: its last byte is in a block never written.
        let grown: Int64 = 3 * 4096 + 100
        let truncated = ftruncate(file.fd, off_t(grown))
        #expect(truncated == 0)
        let holeEnd: Int64 = grown + 500
        #expect(!content.tailBlockHolds(storedEnd: grown, end: holeEnd, blockSize: 4096))
    }

    @Test("the tail block's start is known only for a range inside the block of the last byte; data there is any byte not zero")
    func tailBlockFromTheBytesRead() throws {
        try Self.withEncryptedFile { content, _ in
            #expect(content.tailBlockStart(storedEnd: 0, end: 100, blockSize: 4096) == nil)
            #expect(content.tailBlockStart(storedEnd: 5000, end: 5000, blockSize: 4096) == nil)
            #expect(content.tailBlockStart(storedEnd: 5000, end: 8192, blockSize: 4096) == 4096)
            #expect(content.tailBlockStart(storedEnd: 5000, end: 8193, blockSize: 4096) == nil)
            #expect(content.tailBlockStart(storedEnd: 4096, end: 4097, blockSize: 4096) == nil)
            #expect(content.tailBlockStart(storedEnd: 4097, end: 4200, blockSize: 4096) == 4096)
            // Bytes read at backing offset 3000..<5000: only those from 4096 on count.
            var stored = [UInt8](repeating: 0, count: 2000)
            stored[0] = 1
            stored[1095] = 1
            stored.withUnsafeBytes { bytes in
                #expect(!content.hasData(bytes, from: 4096, storedOffset: 3000), "a byte before the tail block counted")
                #expect(content.hasData(bytes, from: 4095, storedOffset: 3000))
                #expect(content.hasData(bytes, from: 0, storedOffset: 3000))
            }
            stored[1999] = 9
            stored.withUnsafeBytes { bytes in
                #expect(content.hasData(bytes, from: 4096, storedOffset: 3000))
                #expect(!content.hasData(bytes, from: 5000, storedOffset: 3000), "an empty range has data")
            }
        }
    }

    @Test("appends of 1 to 700 bytes into the last block read back exactly, with the stored size of the format")
    func appendsIntoTheTailBlock() throws {
        try Self.withEncryptedFile { content, path in
            var rng = SplitMix64(seed: 11)
            var expected: [UInt8] = []
            for round in 0..<60 {
                let piece = FormatFixture.randomBytes(1 + (round * 97) % 700, using: &rng)
                try FormatFixture.write(content, piece, at: Int64(expected.count))
                expected += piece
            }
            #expect(try FormatFixture.readAll(content) == expected)
            let stored = try FormatFixture.readFile(path).count
            #expect(Int64(stored) == content.storedSize(plaintextSize: Int64(expected.count)))
        }
    }
}
