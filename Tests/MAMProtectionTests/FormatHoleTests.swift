import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMTestSupport

/// Holes in encrypted files (docs/FORMAT.md, "Holes"): the sparse flag, what is stored as a
/// hole, what still fails authentication, fallocate's modes and SEEK_DATA/SEEK_HOLE.
@Suite("Format holes: sparse encrypted files")
struct FormatHoleTests {
    static let bs = BlockLayout.plaintextBlockSize
    static let slot = BlockLayout.storedBlockSize

    /// A new encrypted file whose header can be made sparse (as through a mount).
    static func sparseCapable(_ file: BackingFile, accountKey: SymmetricKey) throws -> ProtectedFileContent {
        let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 1, accountKey: accountKey)
        return try ProtectedFileContent(fd: file.fd, header: header, fileKey: fileKey,
                                        sparseHeader: { try $0.markedSparse(accountKey: accountKey) })
    }

    /// The stored bytes of block `index` of `file` (header length `headerLength`).
    static func storedBlock(_ file: BackingFile, _ index: Int, headerLength: Int) throws -> [UInt8] {
        let all = try FormatFixture.readFile(file.path)
        let start = headerLength + index * slot
        return Array(all[start..<min(all.count, start + slot)])
    }

    static func allocatedBytes(_ file: BackingFile) -> Int {
        var st = stat()
        fstat(file.fd, &st)
        return Int(st.st_blocks) * 512
    }

    @Test("growing truncate stores holes: 64 MiB take no space, read as zeros, the header gets the flag")
    func truncateStoresHoles() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("t"))
        defer { withExtendedLifetime(file) {} }
        let content = try Self.sparseCapable(file, accountKey: key)
        try FormatFixture.write(content, Array("head".utf8), at: 0)
        #expect(content.header?.isSparse == false)
        try content.truncate(to: 64 << 20)
        #expect(content.header?.isSparse == true)
        #expect(try content.plaintextSize() == 64 << 20)
        #expect(Self.allocatedBytes(file) < 64 << 10, "backing allocation \(Self.allocatedBytes(file))")
        let reread = try FormatFixture.reopen(file, accountKey: key)
        #expect(reread.header?.isSparse == true)
        #expect(reread.header?.length == content.header?.length)
        #expect(try FormatFixture.read(reread, at: 0, count: 4) == Array("head".utf8))
        #expect(try FormatFixture.read(reread, at: 4, count: Self.bs - 4) == [UInt8](repeating: 0, count: Self.bs - 4))
        #expect(try FormatFixture.read(reread, at: Int64(40 << 20) + 17, count: 3 * Self.bs) == [UInt8](repeating: 0, count: 3 * Self.bs))
        // Block 0 was sealed again at full length; block 1 on is stored as zeros.
        let headerLength = try #require(content.header?.length)
        #expect(try Self.storedBlock(file, 0, headerLength: headerLength).count == Self.slot)
        #expect(try Self.storedBlock(file, 0, headerLength: headerLength).contains { $0 != 0 })
        #expect(try Self.storedBlock(file, 1, headerLength: headerLength) == [UInt8](repeating: 0, count: Self.slot))
    }

    @Test("without a way to set the flag a file grows with encrypted zeros, as before")
    func noSourceMeansEncryptedZeros() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("z"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        try content.writeHeaderIfMissing()
        try content.truncate(to: Int64(3 * Self.bs + 5))
        try content.allocate(.punchHole, offset: 0, length: Int64(2 * Self.bs))
        #expect(content.header?.isSparse == false)
        let headerLength = try #require(content.header?.length)
        for index in 0..<4 {
            let stored = try Self.storedBlock(file, index, headerLength: headerLength)
            #expect(stored.contains { $0 != 0 }, "block \(index) is stored as zeros without the flag")
        }
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == [UInt8](repeating: 0, count: 3 * Self.bs + 5))
    }

    @Test("an all-zero block fails authentication in a file without the flag and reads as zeros in a sparse one")
    func zeroBlockNeedsTheFlag() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 41)
        let data = FormatFixture.randomBytes(3 * Self.bs, using: &rng)
        for sparse in [false, true] {
            let file = try BackingFile(path: dir.file("b\(sparse)"))
            let content = try Self.sparseCapable(file, accountKey: key)
            try FormatFixture.write(content, data, at: 0)
            if sparse {
                // A hole elsewhere sets the flag; block 1 stays data.
                try content.truncate(to: Int64(5 * Self.bs))
                #expect(content.header?.isSparse == true)
            }
            let headerLength = try #require(content.header?.length)
            let zeros = [UInt8](repeating: 0, count: Self.slot)
            try zeros.withUnsafeBytes { try FileIO.pwriteFully(file.fd, $0, at: Int64(headerLength + Self.slot)) }
            let reread = try FormatFixture.reopen(file, accountKey: key)
            #expect(try FormatFixture.read(reread, at: 0, count: Self.bs) == Array(data[0..<Self.bs]))
            if sparse {
                // NOT detected (docs/FORMAT.md): a whole block of a sparse file replaced by a hole.
                #expect(try FormatFixture.read(reread, at: Int64(Self.bs), count: Self.bs) == [UInt8](repeating: 0, count: Self.bs))
            } else {
                #expect(FormatFixture.isAuthenticationFailure { _ = try FormatFixture.read(reread, at: Int64(Self.bs), count: 1) })
            }
            withExtendedLifetime(file) {}
        }
    }

    @Test("the sparse flag cannot be set without the account key: a rewritten flags byte fails the wrap")
    func forgedFlagFails() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("f"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        try FormatFixture.write(content, [UInt8](repeating: 7, count: 100), at: 0)
        var flags: UInt8 = 0x03
        _ = withUnsafeBytes(of: &flags) { pwrite(file.fd, $0.baseAddress, 1, 9) }
        #expect(FormatFixture.isAuthenticationFailure { _ = try FormatFixture.reopen(file, accountKey: key) })
        // Flag bit 1 on a plain header is malformed.
        let plain = try ProtectedFileHeader(plainOwner: FormatFixture.owner).encoded()
        var forged = plain
        forged[9] = 0x02
        #expect(FormatFixture.isAuthenticationFailure { _ = try forged.withUnsafeBytes { try ProtectedFileHeader.decode($0) } })
    }

    @Test("markedSparse keeps owner, key id, file id, file key and length; rewrapping for another owner keeps the flag")
    func markedSparseKeepsEverythingElse() throws {
        let key = try SymmetricKey.random()
        let otherKey = try SymmetricKey.random()
        let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 3, accountKey: key)
        let sparse = try header.markedSparse(accountKey: key)
        #expect(sparse.isSparse && !header.isSparse)
        #expect(sparse.length == header.length)
        #expect(sparse.owner == header.owner && sparse.encryption?.keyId == 3 && sparse.encryption?.fileId == header.encryption?.fileId)
        #expect(try sparse.unwrapFileKey(accountKey: key).copyBytes() == fileKey.copyBytes())
        #expect(sparse.encoded()[9] == 0x03)
        let decoded = try #require(try sparse.encoded().withUnsafeBytes { try ProtectedFileHeader.decode($0) })
        #expect(decoded == sparse)
        let moved = try sparse.rewrapped(owner: "8c7f3e1a-0000-4000-8000-000000000002", keyId: 1, oldAccountKey: key, newAccountKey: otherKey)
        #expect(moved.isSparse)
        #expect(throws: MAMError.self) { _ = try header.markedSparse(accountKey: otherKey) }
    }

    @Test("a write that starts whole blocks past the end stores the gap as holes and seals only what it covers")
    func writePastEndStoresHoles() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("w"))
        defer { withExtendedLifetime(file) {} }
        let content = try Self.sparseCapable(file, accountKey: key)
        try FormatFixture.write(content, [UInt8](repeating: 1, count: 100), at: 0)
        try FormatFixture.write(content, [UInt8](repeating: 2, count: 50), at: Int64(3 * Self.bs + 10))
        #expect(content.header?.isSparse == true)
        let headerLength = try #require(content.header?.length)
        #expect(try Self.storedBlock(file, 0, headerLength: headerLength).count == Self.slot)
        for hole in [1, 2] {
            #expect(try Self.storedBlock(file, hole, headerLength: headerLength) == [UInt8](repeating: 0, count: Self.slot))
        }
        #expect(try Self.storedBlock(file, 3, headerLength: headerLength).count == 60 + BlockLayout.overhead)
        var expected = [UInt8](repeating: 0, count: 3 * Self.bs + 60)
        expected.replaceSubrange(0..<100, with: [UInt8](repeating: 1, count: 100))
        expected.replaceSubrange((3 * Self.bs + 10)..<(3 * Self.bs + 60), with: [UInt8](repeating: 2, count: 50))
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == expected)
        // A write into a hole seals that block; the other hole stays one.
        try FormatFixture.write(content, [3, 3], at: Int64(Self.bs + 1))
        #expect(try Self.storedBlock(file, 1, headerLength: headerLength).contains { $0 != 0 })
        #expect(try Self.storedBlock(file, 2, headerLength: headerLength) == [UInt8](repeating: 0, count: Self.slot))
        expected[Self.bs + 1] = 3
        expected[Self.bs + 2] = 3
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == expected)
    }

    @Test("punch: whole blocks become holes and lose their space, edge blocks are zeroed and sealed again")
    func punchHole() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("p"))
        defer { withExtendedLifetime(file) {} }
        let content = try Self.sparseCapable(file, accountKey: key)
        var rng = SplitMix64(seed: 7)
        var model = FormatFixture.randomBytes(64 * Self.bs + 300, using: &rng)
        try FormatFixture.write(content, model, at: 0)
        let before = Self.allocatedBytes(file)
        try content.allocate(.punchHole, offset: 1000, length: Int64(40 * Self.bs))
        model.replaceSubrange(1000..<(1000 + 40 * Self.bs), with: [UInt8](repeating: 0, count: 40 * Self.bs))
        #expect(content.header?.isSparse == true)
        #expect(try content.plaintextSize() == Int64(model.count))
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == model)
        #expect(Self.allocatedBytes(file) < before - 30 * Self.bs, "allocation \(before) -> \(Self.allocatedBytes(file))")
        let headerLength = try #require(content.header?.length)
        #expect(try Self.storedBlock(file, 0, headerLength: headerLength).contains { $0 != 0 })
        #expect(try Self.storedBlock(file, 5, headerLength: headerLength) == [UInt8](repeating: 0, count: Self.slot))
        #expect(try Self.storedBlock(file, 40, headerLength: headerLength).contains { $0 != 0 })
        // Past the end: nothing changes; the last (short) block punched whole is a short hole.
        try content.allocate(.punchHole, offset: Int64(model.count + 5), length: 100)
        try content.allocate(.punchHole, offset: Int64(64 * Self.bs), length: 1 << 20)
        model.replaceSubrange((64 * Self.bs)..., with: [UInt8](repeating: 0, count: 300))
        #expect(try Self.storedBlock(file, 64, headerLength: headerLength) == [UInt8](repeating: 0, count: 300 + BlockLayout.overhead))
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == model)
    }

    @Test("zero range with and without KEEP_SIZE, allocate with and without KEEP_SIZE: sizes, bytes and space")
    func zeroRangeAndAllocate() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("zr"))
        defer { withExtendedLifetime(file) {} }
        let content = try Self.sparseCapable(file, accountKey: key)
        var rng = SplitMix64(seed: 8)
        var model = FormatFixture.randomBytes(5 * Self.bs + 7, using: &rng)
        try FormatFixture.write(content, model, at: 0)
        try content.allocate(.zeroRange(keepSize: true), offset: 10, length: Int64(10 * Self.bs))
        model.replaceSubrange(10..., with: [UInt8](repeating: 0, count: model.count - 10))
        #expect(try content.plaintextSize() == Int64(model.count))
        try content.allocate(.zeroRange(keepSize: false), offset: Int64(Self.bs - 1), length: Int64(8 * Self.bs))
        model += [UInt8](repeating: 0, count: Self.bs - 1 + 8 * Self.bs - model.count)
        #expect(try content.plaintextSize() == Int64(model.count))
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == model)
        // KEEP_SIZE reserves space past the end without changing the size; mode 0 grows.
        let before = Self.allocatedBytes(file)
        try content.allocate(.allocate(keepSize: true), offset: Int64(model.count), length: 1 << 20)
        #expect(try content.plaintextSize() == Int64(model.count))
        #expect(Self.allocatedBytes(file) >= before + (1 << 20), "allocation \(before) -> \(Self.allocatedBytes(file))")
        try content.allocate(.allocate(keepSize: false), offset: 3, length: Int64(20 * Self.bs + 5))
        model += [UInt8](repeating: 0, count: 3 + 20 * Self.bs + 5 - model.count)
        #expect(try content.plaintextSize() == Int64(model.count))
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == model)
        // The unchanged size gives back what was reserved past the end (as ext4): what is left is
        // the stored bytes in whole blocks, and at most one block of ext4's extent tree (which
        // st_blocks counts once a file has more extents than its inode holds).
        try content.truncate(to: Int64(model.count))
        let stored = ProtectedFileContent.storedSize(plaintextSize: Int64(model.count), header: content.header)
        #expect(Self.allocatedBytes(file) <= (stored + 4095) / 4096 * 4096 + 4096, "\(Self.allocatedBytes(file)) for \(stored) stored bytes")
        #expect(AllocationMode(flags: 0x08) == nil && AllocationMode(flags: 0x20) == nil && AllocationMode(flags: 0x02) == nil)
        #expect(AllocationMode(flags: 0x03) == .punchHole && AllocationMode(flags: 0x11) == .zeroRange(keepSize: true))
    }

    @Test("SEEK_DATA/SEEK_HOLE: ENXIO outside the file; a sparse file reports its holes, never data as a hole")
    func seekHolesAndData() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        for kind in ContentKind.allCases {
            let file = try BackingFile(path: dir.file("s-\(kind)"))
            let content = kind == .encrypted ? try Self.sparseCapable(file, accountKey: key)
                : try FormatFixture.makeContent(kind, file: file, accountKey: key)
            for offset in [Int64(-1), -4096, 0, 5] {
                #expect(throws: MAMError.system("seek", errno: ENXIO)) { _ = try content.seek(.data, from: offset) }
                #expect(throws: MAMError.system("seek", errno: ENXIO)) { _ = try content.seek(.hole, from: offset) }
            }
            // data in blocks 0 and 40, holes between and after (to 60 blocks + 1).
            try FormatFixture.write(content, [UInt8](repeating: 9, count: 10), at: 0)
            try FormatFixture.write(content, [UInt8](repeating: 9, count: 10), at: Int64(40 * Self.bs))
            try content.truncate(to: Int64(60 * Self.bs + 1))
            let size = Int64(60 * Self.bs + 1)
            let all = try FormatFixture.readAll(content)
            for offset in stride(from: Int64(0), to: size, by: 1999) {
                let data = try? content.seek(.data, from: offset)
                let hole = try content.seek(.hole, from: offset)
                #expect(hole >= offset && hole <= size)
                // Everything between the offset and the data it reports is zeros.
                let dataAt = data ?? size
                #expect(dataAt >= offset && all[Int(offset)..<Int(dataAt)].allSatisfy { $0 == 0 }, "\(kind) SEEK_DATA \(offset) -> \(dataAt)")
                // A reported hole holds zeros up to the next data.
                if hole < size {
                    let next = (try? content.seek(.data, from: hole)) ?? size
                    #expect(next > hole && all[Int(hole)..<Int(next)].allSatisfy { $0 == 0 }, "\(kind) SEEK_HOLE \(offset) -> \(hole)")
                }
            }
            for offset in [size, size + 1, Int64(-1)] {
                #expect(throws: MAMError.system("seek", errno: ENXIO)) { _ = try content.seek(.data, from: offset) }
                #expect(throws: MAMError.system("seek", errno: ENXIO)) { _ = try content.seek(.hole, from: offset) }
            }
            // Real holes are found: the middle of the gap between the two data blocks.
            #expect(try content.seek(.hole, from: Int64(20 * Self.bs)) == Int64(20 * Self.bs), "\(kind)")
            #expect(try content.seek(.data, from: Int64(20 * Self.bs)) <= Int64(40 * Self.bs), "\(kind)")
            #expect(try content.seek(.data, from: Int64(20 * Self.bs)) > Int64(20 * Self.bs), "\(kind)")
            withExtendedLifetime(file) {}
        }
    }

    @Test("a file with holes from Swift decrypts in the Python decoder to the same bytes")
    func pythonReadsHoles() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("py"))
        defer { withExtendedLifetime(file) {} }
        let content = try Self.sparseCapable(file, accountKey: key)
        try FormatFixture.write(content, Array("first".utf8), at: 0)
        try FormatFixture.write(content, Array("later".utf8), at: Int64(7 * Self.bs + 3))
        try content.allocate(.punchHole, offset: 0, length: Int64(Self.bs))
        try content.truncate(to: Int64(12 * Self.bs + 77))
        let expected = try FormatFixture.readAll(content)
        let out = dir.file("py.out")
        let run = try FormatCrossCheckTests.python(["decrypt", file.path, "--account-key", FormatCrossCheckTests.hexKey(key), "-o", out])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try FormatFixture.readFile(out) == expected)
        let info = try FormatCrossCheckTests.python(["info", file.path])
        #expect(String(decoding: info.stdout, as: UTF8.self).contains("\"sparse\": true"), "\(info.stderr)")
    }

    @Test("model-based: 1500 seeded operations with holes, punches, zero ranges and allocations agree with a model")
    func modelBased() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("model"))
        defer { withExtendedLifetime(file) {} }
        var content = try Self.sparseCapable(file, accountKey: key)
        var model: [UInt8] = []
        var rng = SplitMix64(seed: 0x4013_5EED)
        func offset(_ rng: inout SplitMix64) -> Int {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return Int.random(in: 0...(model.count + 40_000), using: &rng)
            case 1: return Int.random(in: 0...12, using: &rng) * Self.bs + Int.random(in: -2...2, using: &rng)
            default: return max(0, model.count + Int.random(in: -6000...6000, using: &rng))
            }
        }
        func length(_ rng: inout SplitMix64) -> Int {
            Int.random(in: 0..<4, using: &rng) == 0 ? Int.random(in: 1...3, using: &rng) * Self.bs : Int.random(in: 1...20_000, using: &rng)
        }
        func zero(_ from: Int, _ to: Int) {
            let end = min(to, model.count)
            if from < end { model.replaceSubrange(from..<end, with: [UInt8](repeating: 0, count: end - from)) }
        }
        func grow(_ to: Int) { if to > model.count { model += [UInt8](repeating: 0, count: to - model.count) } }
        for step in 0..<1500 {
            let at = max(0, offset(&rng))
            let count = length(&rng)
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<30:
                let bytes = FormatFixture.randomBytes(count, using: &rng)
                try FormatFixture.write(content, bytes, at: Int64(at))
                grow(at + count)
                model.replaceSubrange(at..<(at + count), with: bytes)
            case 30..<45:
                try content.truncate(to: Int64(at))
                if at < model.count { model.removeSubrange(at...) } else { grow(at) }
            case 45..<58:
                try content.allocate(.punchHole, offset: Int64(at), length: Int64(count))
                zero(at, at + count)
            case 58..<66:
                try content.allocate(.zeroRange(keepSize: true), offset: Int64(at), length: Int64(count))
                zero(at, at + count)
            case 66..<74:
                try content.allocate(.zeroRange(keepSize: false), offset: Int64(at), length: Int64(count))
                zero(at, at + count)
                grow(at + count)
            case 74..<80:
                let keepSize = Bool.random(using: &rng)
                try content.allocate(.allocate(keepSize: keepSize), offset: Int64(at), length: Int64(count))
                if !keepSize { grow(at + count) }
            case 80..<95:
                let got = try FormatFixture.read(content, at: Int64(at), count: count)
                let lo = min(at, model.count)
                let hi = min(at + count, model.count)
                #expect(got == Array(model[lo..<hi]), "step \(step): read \(at)+\(count) of \(model.count)")
                if got != Array(model[lo..<hi]) { return }
            default:
                content = try ProtectedFileContent(fd: file.fd, header: try ProtectedFileHeader.read(fd: file.fd),
                                                   fileKey: try #require(try ProtectedFileHeader.read(fd: file.fd)).unwrapFileKey(accountKey: key),
                                                   sparseHeader: { try $0.markedSparse(accountKey: key) })
            }
            let size = try content.plaintextSize()
            #expect(size == Int64(model.count), "step \(step): size \(size), model \(model.count)")
            if size != Int64(model.count) { return }
            if step % 100 == 99 {
                #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == model, "step \(step): full content")
            }
        }
        #expect(content.header?.isSparse == true)
        #expect(try FormatFixture.readAll(FormatFixture.reopen(file, accountKey: key)) == model)
    }
}
