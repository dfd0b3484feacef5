import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// When a write past the end may skip its space reservation (`tailBlockHolds`): only when the
/// new bytes stay in the filesystem block that holds the file's last byte and that byte is data.
@Suite("Reservation skipped only inside the last, allocated block")
struct TailBlockReservationTests {
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
}
