import Foundation
import Glibc
import Testing
import MAMProtection
import MAMTestSupport

/// Small appends to an encrypted file skip the space reservation when their bytes land in the
/// filesystem block that already holds the file's last byte. On a full disk that must still
/// mean: an append that needs no new block succeeds, one that needs a block is ENOSPC with the
/// file unchanged, and a file whose last block is a hole is never written into without a
/// reservation.
@Suite("Full disk: appends inside and past the last block")
struct FullDiskAppendTests {
    static let owner = "8c7f3e1a-0000-4000-8000-000000000001"

    /// An encrypted (or, with `plain`, plain-tagged) file on a 1 MiB tmpfs that is then filled
    /// up, all but `free` bytes; the body gets `setUp`.
    private func withFullDisk(sparse: Bool = false, plain: Bool = false, free: Int = 0,
                              _ setUp: (ProtectedFileContent) throws -> Void,
                              _ check: (ProtectedFileContent, String) throws -> Void) throws {
        let disk = try SmallTmpfs(size: "1m")
        defer { disk.close() }
        let path = disk.path + "/f"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        let content: ProtectedFileContent
        if plain {
            content = try ProtectedFileContent(fd: fd, header: try ProtectedFileHeader(plainOwner: Self.owner), fileKey: nil)
        } else {
            let key = try SymmetricKey.random()
            let header = try ProtectedFileHeader(owner: Self.owner, keyId: 1, fileId: (0..<16).map { _ in UInt8.random(in: 0...255) },
                                                 fileKey: key, accountKey: try SymmetricKey.random(), sparse: sparse)
            content = try ProtectedFileContent(fd: fd, header: header, fileKey: key)
        }
        try setUp(content)
        // Fill the rest of the disk, then give back `free` bytes.
        let filler = open(disk.path + "/filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        try #require(filler >= 0)
        let chunk = [UInt8](repeating: 0x5a, count: 4096)
        while chunk.withUnsafeBytes({ Glibc.write(filler, $0.baseAddress, $0.count) }) > 0 {}
        #expect(errno == ENOSPC)
        if free > 0 {
            let filled = lseek(filler, 0, SEEK_END)
            try #require(ftruncate(filler, filled - off_t(free)) == 0)
        }
        close(filler)
        try check(content, path)
    }

    /// Free blocks of the filesystem holding `path`.
    private func freeBlocks(_ path: String) -> UInt {
        var fs = statvfs()
        return statvfs(path, &fs) == 0 ? UInt(fs.f_bfree) : 0
    }

    private func bytes(_ content: ProtectedFileContent) throws -> [UInt8] {
        let size = Int(try content.plaintextSize())
        var out = [UInt8](repeating: 0, count: size)
        let n = try out.withUnsafeMutableBytes { try content.read(into: $0, at: 0) }
        return Array(out[0..<n])
    }

    private func write(_ content: ProtectedFileContent, _ data: [UInt8], at offset: Int64) throws {
        try data.withUnsafeBytes { try content.write($0, at: offset) }
    }

    private func storedSize(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : -1
    }

    /// `withFullDisk` on a file of 4 KiB of sevens grown by truncate to `grown` bytes (holes
    /// past the first block when `sparse`, else encrypted zeros); `check` also gets the bytes
    /// it reads, checked to be those.
    private func withGrownFile(to grown: Int64, sparse: Bool, plain: Bool = false, free: Int = 0,
                               _ check: (ProtectedFileContent, String, _ before: [UInt8]) throws -> Void) throws {
        let first = [UInt8](repeating: 7, count: 4096)
        try withFullDisk(sparse: sparse, plain: plain, free: free, { content in
            try write(content, first, at: 0)
            try content.truncate(to: grown)
        }) { content, path in
            let before = try bytes(content)
            #expect(before == first + [UInt8](repeating: 0, count: Int(grown) - 4096))
            try check(content, path, before)
        }
    }

    @Test("an append inside the last block succeeds on a full disk; one needing a new block is ENOSPC and changes nothing")
    func appendsOnAFullDisk() throws {
        let first = [UInt8](repeating: 1, count: 1000)
        try withFullDisk({ try write($0, first, at: 0) }) { content, path in
            let small = [UInt8](repeating: 2, count: 100)
            try write(content, small, at: 1000)
            #expect(try bytes(content) == first + small)
            let before = storedSize(path)
            do {
                try write(content, [UInt8](repeating: 3, count: 8192), at: 1100)
                Issue.record("an append needing new blocks succeeded on a full disk")
            } catch MAMError.system(_, let code) {
                #expect(code == ENOSPC)
            }
            #expect(storedSize(path) == before)
            #expect(try bytes(content) == first + small)
        }
    }

    @Test("a file whose last block is a hole gets a reservation before an append into that block: ENOSPC, nothing changed",
          arguments: [false, true])
    func appendIntoATailHole(sparse: Bool) throws {
        // Sparse: blocks 1-4 become holes (the last one partial); otherwise encrypted zeros.
        let grown: Int64 = 4 * 4096 + 3000
        try withGrownFile(to: grown, sparse: sparse) { content, path, before in
            let storedBefore = storedSize(path)
            let tailIsData = lseek(content.fd, off_t(storedBefore - 1), 3 /* SEEK_DATA */) == off_t(storedBefore - 1)
            #expect(tailIsData == !sparse)
            let appended = [UInt8](repeating: 9, count: 500)
            do {
                try write(content, appended, at: grown)
                #expect(!sparse, "an append into a hole succeeded on a full disk")
                #expect(try bytes(content) == before + appended)
            } catch MAMError.system(_, let code) {
                #expect(sparse, "an append into an allocated block failed: \(code)")
                #expect(code == ENOSPC)
                #expect(storedSize(path) == storedBefore)
                #expect(try bytes(content) == before)
            }
        }
    }

    /// A write inside a sparse file (encrypted, or plain-tagged and grown by truncate) lands
    /// partly or wholly in holes of the backing file: the filesystem needs new blocks for them
    /// though the file does not grow. The write reserves them first, so a full disk fails it
    /// whole: ENOSPC, every byte as it was (no block torn, none that no longer authenticates),
    /// and the same write goes through once there is room.
    @Test("a write into holes inside a sparse file on a full disk is ENOSPC and tears no block",
          arguments: [false, true],
          [(free: 0, offset: 64 * 1024 + 100, length: 64 * 1024), (free: 8192, offset: 64 * 1024, length: 64 * 1024),
           (free: 0, offset: 4096, length: 4096), (free: 0, offset: 9000, length: 200),
           (free: 16384, offset: 0, length: 300 * 1024)])
    func writeIntoHolesFailsWhole(plain: Bool, range: (free: Int, offset: Int, length: Int)) throws {
        let (free, offset, length) = range
        try withGrownFile(to: 512 * 1024, sparse: true, plain: plain, free: free) { content, path, before in
            let storedBefore = storedSize(path)
            let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
            do {
                try write(content, data, at: Int64(offset))
                Issue.record("a write of \(length) bytes into holes succeeded with \(free) bytes free")
            } catch MAMError.system(_, let code) {
                #expect(code == ENOSPC)
            }
            #expect(storedSize(path) == storedBefore)
            #expect(try bytes(content) == before)
            // Room again: the same write goes through.
            unlink(URL(fileURLWithPath: path).deletingLastPathComponent().path + "/filler")
            try write(content, data, at: Int64(offset))
            var expected = before
            expected.replaceSubrange(offset..<(offset + length), with: data)
            #expect(try bytes(content) == expected)
        }
    }

    /// An append reserves nothing first when it overwrites no stored byte (the first write of
    /// a file, an append after a whole last block) or only the old last partial block (whose
    /// new bytes past the end are written before it is overwritten). On a disk with room for
    /// part of it, the part written is taken back: ENOSPC, the same bytes, the same stored
    /// size, and no block of the filesystem kept.
    @Test("a write past the stored end that fails part-way is undone: ENOSPC, the same bytes, the same size, no block kept",
          arguments: [(plain: false, length: 0), (plain: false, length: 4096), (plain: false, length: 8192),
                      (plain: false, length: 5000), (plain: false, length: 100),
                      (plain: true, length: 0), (plain: true, length: 4096), (plain: true, length: 5000)])
    func appendPastTheEndFailsWhole(plain: Bool, length: Int) throws {
        let first = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        try withFullDisk(plain: plain, free: 64 * 1024, { content in
            // A file as mamfs creates one: its header written, no data yet.
            if first.isEmpty { try content.writeHeaderIfMissing() } else { try write(content, first, at: 0) }
        }) { content, path in
            let storedBefore = storedSize(path)
            let freeBefore = freeBlocks(path)
            // 640 KiB: more than the free 64 KiB, and more than one chunk of sealed blocks.
            let big = (0..<(640 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            do {
                try write(content, big, at: Int64(first.count))
                Issue.record("a write of 640 KiB succeeded with 64 KiB free")
            } catch MAMError.system(_, let code) {
                #expect(code == ENOSPC)
            }
            #expect(storedSize(path) == storedBefore)
            #expect(freeBlocks(path) == freeBefore)
            #expect(try bytes(content) == first)
            // The file still takes a write that fits.
            let small = [UInt8](repeating: 6, count: 5000)
            try write(content, small, at: Int64(first.count))
            #expect(try bytes(content) == first + small)
        }
    }
}
