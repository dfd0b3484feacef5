import MAMProtection
import Testing

@Suite("ProtectedFileContent.visiblePlaintextSize")
struct VisiblePlaintextSizeTests {
    private let owner = "8c7f3e1a-0000-4000-8000-000000000001"
    private let block = Int64(BlockLayout.storedBlockSize)
    private let overhead = Int64(BlockLayout.overhead)

    private func encryptedHeader() throws -> ProtectedFileHeader {
        try ProtectedFileHeader(owner: owner, keyId: 1, fileId: [UInt8](repeating: 7, count: 16),
                                fileKey: try SymmetricKey.random(), accountKey: try SymmetricKey.random())
    }

    @Test func encryptedBodiesOfValidLength() throws {
        let header = try encryptedHeader()
        let h = Int64(header.length)
        #expect(h == 129)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: 0, header: header) == 0)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: h, header: header) == 0)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: h + block, header: header) == 4096)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: h + block + overhead + 100, header: header) == 4196)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: h + 3 * block + overhead + 1, header: header) == 3 * 4096 + 1)
    }

    @Test func tornTailShorterThanOverheadCountsWholeBlocks() throws {
        let header = try encryptedHeader()
        let h = Int64(header.length)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: h + 5, header: header) == 0)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: h + block + 5, header: header) == 4096)
    }

    @Test("an exact multiple of blocks plus 1...overhead stored bytes", arguments: Array(1...28) as [Int64])
    func exactMultiplePlusTornBytes(extra: Int64) throws {
        let header = try encryptedHeader()
        let stored = Int64(header.length) + 2 * block + extra
        #expect(throws: (any Error).self) { _ = try ProtectedFileContent.plaintextSize(storedSize: stored, header: header) }
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: stored, header: header) == 2 * 4096)
    }

    @Test func fileEndingInsideItsHeaderShowsNothing() throws {
        let header = try encryptedHeader()
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: 60, header: header) == 0)
    }

    @Test func plainAndUntaggedFilesShowTheirBody() throws {
        let plain = try ProtectedFileHeader(plainOwner: owner)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: 49 + 5, header: plain) == 5)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: 0, header: plain) == 0)
        #expect(ProtectedFileContent.visiblePlaintextSize(storedSize: 12_345, header: nil) == 12_345)
    }
}
