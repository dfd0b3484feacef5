import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// The multi-threaded whole-file copy behind encryptFile, decryptFile and protect.
@Suite("Plaintext copy on several workers")
struct PlaintextCopyTests {
    static let chunk = PlaintextCopy.chunkSize
    /// Sizes around the chunk and block edges, and one whose last chunk ends inside a block.
    static let sizes = [1, chunk - 1, chunk, chunk + 1, 3 * chunk + 4097, 5 * chunk + 123]

    @Test("every worker count stores the same plaintext, at the stored size the format gives",
          arguments: [ContentKind.encrypted, .plainTagged, .untagged], [1, 2, 3, 4])
    func sameBytesWhateverTheWorkers(kind: ContentKind, workers: Int) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: UInt64(workers))
        for size in Self.sizes {
            let data = FormatFixture.randomBytes(size, using: &rng)
            let sourceFile = try BackingFile(path: dir.file("src-\(size)"))
            let source = try FormatFixture.makeContent(.encrypted, file: sourceFile, accountKey: key)
            try FormatFixture.write(source, data, at: 0)
            let path = dir.file("\(kind)-\(workers)-\(size)")
            let file = try BackingFile(path: path)
            let destination = try FormatFixture.makeContent(kind, file: file, accountKey: key)
            try PlaintextCopy(source: source, destination: destination).run(size: Int64(size), workers: workers)
            let reread = try FormatFixture.reopen(file, accountKey: key)
            #expect(try FormatFixture.readAll(reread) == data, "\(kind), \(workers) workers, \(size) bytes")
            #expect(try FormatFixture.readFile(path).count
                    == Int(ProtectedFileContent.storedSize(plaintextSize: Int64(size), header: destination.header)))
            withExtendedLifetime(sourceFile) {}
            withExtendedLifetime(file) {}
        }
    }

    @Test("an encrypted copy gives each block a fresh nonce: no two stored blocks share one", arguments: [1, 4])
    func noncesAreNotReused(workers: Int) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 9)
        let data = FormatFixture.randomBytes(3 * Self.chunk, using: &rng)
        let sourceFile = try BackingFile(path: dir.file("src"))
        let source = try FormatFixture.makeContent(.untagged, file: sourceFile, accountKey: key)
        try FormatFixture.write(source, data, at: 0)
        let file = try BackingFile(path: dir.file("enc"))
        let destination = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        try PlaintextCopy(source: source, destination: destination).run(size: Int64(data.count), workers: workers)
        let stored = try FormatFixture.readFile(dir.file("enc"))
        let body = stored[Int(destination.dataOffset)...]
        var nonces = Set<[UInt8]>()
        for start in stride(from: body.startIndex, to: body.endIndex, by: BlockLayout.storedBlockSize) {
            nonces.insert(Array(body[start..<start + AESGCM.nonceSize]))
        }
        #expect(nonces.count == data.count / BlockLayout.plaintextBlockSize)
        withExtendedLifetime(sourceFile) {}
        withExtendedLifetime(file) {}
    }

    @Test("a source shorter than the size asked for is an EAGAIN error, not a copy with a gap", arguments: [1, 3])
    func shrunkSourceIsAnError(workers: Int) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 3)
        let data = FormatFixture.randomBytes(2 * Self.chunk + 10, using: &rng)
        let sourceFile = try BackingFile(path: dir.file("src"))
        let source = try FormatFixture.makeContent(.untagged, file: sourceFile, accountKey: key)
        try FormatFixture.write(source, data, at: 0)
        let file = try BackingFile(path: dir.file("dst"))
        let destination = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        do {
            try PlaintextCopy(source: source, destination: destination).run(size: Int64(data.count + Self.chunk), workers: workers)
            Issue.record("the copy of a file shorter than its size succeeded")
        } catch MAMError.system(let what, let code) {
            #expect(code == EAGAIN)
            #expect(what.contains("shorter"))
        }
        withExtendedLifetime(sourceFile) {}
        withExtendedLifetime(file) {}
    }

    @Test("a damaged block in a late chunk fails the copy with authenticationFailed on every worker count",
          arguments: [1, 2, 4])
    func damagedBlockStopsTheCopy(workers: Int) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 4)
        let data = FormatFixture.randomBytes(4 * Self.chunk, using: &rng)
        let sourcePath = dir.file("src")
        do {
            let sourceFile = try BackingFile(path: sourcePath)
            let source = try FormatFixture.makeContent(.encrypted, file: sourceFile, accountKey: key)
            try FormatFixture.write(source, data, at: 0)
        }
        var stored = try FormatFixture.readFile(sourcePath)
        let damagedBlock = 3 * Self.chunk / BlockLayout.plaintextBlockSize + 7
        stored[stored.count - (4 * Self.chunk / BlockLayout.plaintextBlockSize - damagedBlock) * BlockLayout.storedBlockSize + 40] ^= 0x01
        try FormatFixture.writeFile(sourcePath, stored)
        let sourceFile = try BackingFile(path: sourcePath)
        let source = try FormatFixture.reopen(sourceFile, accountKey: key)
        let file = try BackingFile(path: dir.file("dst"))
        let destination = try FormatFixture.makeContent(.untagged, file: file, accountKey: key)
        #expect(throws: MAMError.authenticationFailed("block \(damagedBlock) does not authenticate")) {
            try PlaintextCopy(source: source, destination: destination).run(size: Int64(data.count), workers: workers)
        }
        withExtendedLifetime(sourceFile) {}
        withExtendedLifetime(file) {}
    }

    @Test("decryptFile of a multi-chunk file with a damaged block leaves no output and no temp file")
    func damagedMultiChunkDecryptLeavesNothing() throws {
        let f = try StateFixture()
        let p = try f.write("big", randomBytes(3 * Self.chunk + 5, seed: 11))
        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedId)
        var stored = try f.read(p)
        stored[stored.count - 3 * BlockLayout.storedBlockSize] ^= 0x80
        try Data(stored).write(to: URL(fileURLWithPath: p))
        #expect(throws: (any Error).self) { try f.context.files.decryptFile(path: p, toCopyPath: f.path("out")) }
        #expect(throws: (any Error).self) { try f.context.files.decryptFile(path: p) }
        #expect(try f.read(p) == stored)
        #expect(!FileManager.default.fileExists(atPath: f.path("out")))
        #expect(f.filesInTemp(of: f.work).isEmpty)
    }

    @Test("one worker for a single chunk; more follow the CPUs this process may use, at most four")
    func workerCount() {
        #expect(PlaintextCopy.workers(for: 0) == 1)
        #expect(PlaintextCopy.workers(for: Int64(Self.chunk)) == 1)
        let cpus = PlaintextCopy.allowedCPUs()
        #expect(cpus >= 1)
        #expect(cpus <= ProcessInfo.processInfo.activeProcessorCount)
        #expect(PlaintextCopy.workers(for: Int64(8 * Self.chunk)) == min(PlaintextCopy.maximumWorkers, cpus))
    }
}
