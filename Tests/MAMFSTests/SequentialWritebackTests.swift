import Foundation
import Glibc
import MAMTestSupport
import Testing
@testable import MAMFS
@testable import MAMProtection

/// A handle's sequential run of writes: its bytes more than a window behind the writer go to
/// the disk while the rest is written; random writes, rewrites and small files send nothing.
@Suite("Sequential writes: early writeback behind the writer")
struct SequentialWritebackTests {
    static let mib: Int64 = 1 << 20

    /// Every range `wrote` answers for `writes` (offset, count), in order.
    static func ranges(_ writes: [(Int64, Int64)]) -> [Range<Int64>] {
        var run = SequentialWriteback()
        return writes.compactMap { run.wrote(at: $0.0, count: $0.1) }
    }

    @Test("1 MiB writes from 0: every 8 MiB the run up to the current write's start, nothing before")
    func sequentialRun() {
        let writes = (0..<24).map { (Int64($0) * Self.mib, Self.mib) }
        #expect(Self.ranges(writes) == [0..<(8 * Self.mib), (8 * Self.mib)..<(16 * Self.mib)])
        // 512-byte appends make a run too.
        let small = (0..<(20_000)).map { (Int64($0) * 512, Int64(512)) }
        #expect(Self.ranges(small) == [0..<(8 * Self.mib)])
    }

    @Test("a seek starts a new run; random writes, descending writes and zero-length writes send nothing")
    func runsAndNonRuns() {
        var writes = (0..<10).map { (Int64($0) * Self.mib, Self.mib) }
        writes += (0..<10).map { (100 * Self.mib + Int64($0) * Self.mib, Self.mib) }
        #expect(Self.ranges(writes) == [0..<(8 * Self.mib), (100 * Self.mib)..<(108 * Self.mib)])
        #expect(Self.ranges((0..<64).map { (Int64(63 - $0) * Self.mib, Self.mib) }).isEmpty)
        var rng = SplitMix64(seed: 9)
        #expect(Self.ranges((0..<4_000).map { _ in (Int64(rng.next() % 65_536) * 4096, Int64(4096)) }).isEmpty)
        // The same 4 KiB rewritten in place is no run.
        #expect(Self.ranges((0..<5_000).map { _ in (Int64(0), Int64(4096)) }).isEmpty)
        // A zero-length write neither sends nor breaks the run.
        var run = SequentialWriteback()
        for i in 0..<8 { #expect(run.wrote(at: Int64(i) * Self.mib, count: Self.mib) == nil) }
        #expect(run.wrote(at: 3, count: 0) == nil)
        #expect(run.wrote(at: 8 * Self.mib, count: Self.mib) == 0..<(8 * Self.mib))
    }

    @Test("the stored range of the blocks from one offset's to another's: encrypted blocks of 4,124 bytes after the header, plain bytes after it")
    func storedRanges() throws {
        let f = try OverlayCoreFixture()
        let nodeid = try OutsideRewriteTests.make(f, "e", Array(repeating: 7, count: 10_000))
        let handle = try OutsideRewriteTests.open(f, nodeid, O_RDWR)
        defer { f.fs.release(handle, caller: f.caller) }
        let content = try f.fs.content(handle)
        let header = content.dataOffset
        #expect(header > 0)
        #expect(content.storedRange(ofBlocksFrom: 0, before: 8192) == header..<(header + 2 * 4124))
        // Both offsets are rounded down to their block: the block holding the first is in
        // the range (a run that began inside it wrote the rest of it), the one holding the
        // second is not (the writer is still in it).
        #expect(content.storedRange(ofBlocksFrom: 100, before: 8191) == header..<(header + 4124))
        #expect(content.storedRange(ofBlocksFrom: 4096, before: 4100).isEmpty)
        let plain = try OverlayCoreFixture(managed: false, policy: Policy(fileEncryptionRequired: false))
        let untagged = try OutsideRewriteTests.make(plain, "p", Array(repeating: 1, count: 10_000))
        let p = try OutsideRewriteTests.open(plain, untagged, O_RDWR)
        defer { plain.fs.release(p, caller: plain.caller) }
        let pc = try plain.fs.content(p)
        #expect(pc.storedRange(ofBlocksFrom: 4096, before: 12_288) == (pc.dataOffset + 4096)..<(pc.dataOffset + 12_288))
    }

    /// The backing file's extents as `filefrag -v` lists them: (first byte, byte count, flags).
    static func extents(_ path: String) throws -> [(start: Int64, length: Int64, flags: String)] {
        let r = try runProcess("/usr/sbin/filefrag", ["-v", path], environment: ProcessInfo.processInfo.environment)
        try #require(r.status == 0, "filefrag: \(r.err)")
        var blockSize: Int64 = 4096
        if let m = r.out.range(of: #"blocks of (\d+) bytes"#, options: .regularExpression) {
            blockSize = Int64(r.out[m].split(separator: " ")[2]) ?? 4096
        }
        return r.out.split(separator: "\n").compactMap { line in
            // " 0:        0..    2047:    34816..   36863:   2048:             unwritten"
            let fields = line.split(separator: ":", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count >= 5, Int(fields[0]) != nil else { return nil }
            let logical = fields[1].split(separator: ".").compactMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
            guard logical.count == 2, let length = Int64(fields[3]) else { return nil }
            return (logical[0] * blockSize, length * blockSize, fields.last ?? "")
        }
    }

    /// Only ext4's delayed allocation shows which pages were sent (FIEMAP's delalloc flag);
    /// the core fixture's backing directory is under /tmp.
    @Test("24 MiB written in 1 MiB writes through one handle: the first 16 MiB are on their way to the disk before any fsync",
          .enabled(if: Ext4Reference.isExt4("/tmp"), "the backing directory is not on ext4"))
    func runIsSentBeforeFsync() throws {
        let f = try OverlayCoreFixture()
        let created = try f.request { try f.fs.create(parent: f.root, name: "big", mode: 0o644, flags: O_CREAT | O_WRONLY, caller: f.caller) }
        defer { f.fs.release(created.handle, caller: f.caller) }
        var rng = SplitMix64(seed: 3)
        let chunk = (0..<Int(Self.mib)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        for i in 0..<24 {
            let written = try chunk.withUnsafeBytes { data in
                try f.request { try f.fs.write(created.handle, data, offset: i * Int(Self.mib), writepage: false, caller: f.caller) }
            }
            #expect(written == chunk.count)
        }
        let content = try f.fs.content(created.handle)
        let sent = content.storedRange(ofBlocksFrom: 0, before: 16 * Self.mib)
        let extents = try Self.extents(f.backing + "/big")
        let head = extents.filter { $0.start < sent.upperBound }
        #expect(!head.isEmpty)
        #expect(head.reduce(0) { $0 + min($1.length, sent.upperBound - $1.start) } == sent.upperBound,
                "extents \(extents)")
        for e in head {
            #expect(!e.flags.contains("delalloc"), "a page of the run's first 16 MiB was still waiting: \(e)")
        }
        // The bytes read back through the core are the ones written.
        let reader = try OutsideRewriteTests.open(f, created.entry.nodeid)
        defer { f.fs.release(reader, caller: f.caller) }
        let back = try f.request { try f.fs.read(reader, size: Int(Self.mib), offset: 23 * Int(Self.mib), caller: f.caller) { Array($0) } }
        #expect(back == chunk)
    }
}
