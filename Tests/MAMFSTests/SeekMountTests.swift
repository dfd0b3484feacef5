import Foundation
import Glibc
import Testing
import MAMTestSupport

/// lseek SEEK_DATA / SEEK_HOLE through a real mount: ENXIO where ext4 answers it (negative
/// offsets: xfstests generic/448; at or past the end), and holes that are really holes.
@Suite("POSIX: SEEK_DATA and SEEK_HOLE, mount vs ext4")
struct SeekMountTests {
    /// argv: a directory. Makes "s" (4 KiB of data at 0 and at 1 MiB, 3 MiB long) and "empty";
    /// prints "<file> <whence> <offset> <result>" for offsets outside the data, then "check
    /// <whence> <offset> ok|bad" for offsets inside: SEEK_DATA's answer has only zeros before
    /// it, SEEK_HOLE's answer lies in zeros (or is the end), both at or after the offset; then
    /// "found <whence> <offset> <answer>" for the offsets in the big gap.
    static let script = #"""
    import errno, os, sys
    os.chdir(sys.argv[1])
    fd = os.open("s", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"\x01" * 4096, 0)
    os.pwrite(fd, b"\x02" * 4096, 1 << 20)
    os.ftruncate(fd, 3 << 20)
    os.fsync(fd)
    empty = os.open("empty", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    size = 3 << 20
    content = os.pread(fd, size, 0)
    names = {os.SEEK_DATA: "SEEK_DATA", os.SEEK_HOLE: "SEEK_HOLE"}

    def seek(f, offset, whence):
        try:
            return os.lseek(f, offset, whence)
        except OSError as e:
            return errno.errorcode[e.errno]

    for whence in names:
        for offset in [-1, -4096, -(1 << 62), -(1 << 63), size, size + 1, 1 << 62]:
            print("s", names[whence], offset, seek(fd, offset, whence))
        for offset in [-1, 0, 1]:
            print("empty", names[whence], offset, seek(empty, offset, whence))
    for offset in list(range(0, size, 65521)) + [4095, 4096, (1 << 20) - 1, (1 << 20) + 4095, size - 1]:
        data = seek(fd, offset, os.SEEK_DATA)
        hole = seek(fd, offset, os.SEEK_HOLE)
        end = size if data == "ENXIO" else data
        good_data = isinstance(end, int) and end >= offset and not any(content[offset:end])
        good_hole = isinstance(hole, int) and offset <= hole <= size and (hole == size or content[hole] == 0)
        print("check", offset, "ok" if good_data and good_hole else "bad %r %r" % (data, hole))
    for offset in [300000, 2 << 20]:
        print("found", offset, seek(fd, offset, os.SEEK_DATA), seek(fd, offset, os.SEEK_HOLE))
    """#

    @Test("ENXIO for negative offsets and offsets at or past the end; answers inside are correct and find the holes",
          arguments: MountedFixture.Kind.allCases)
    func seekMatchesExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind) { m, reference in try Self.compare(m, reference) }
    }

    static func compare(_ m: MountedFixture, _ reference: Ext4Reference) throws {
        func run(_ directory: String) throws -> [String] {
            let r = try m.python(Self.script, in: directory)
            #expect(r.status == 0, "\(directory): \(r.err)")
            return r.out.split(separator: "\n").map(String.init)
        }
        let onMount = try run(m.mountpoint)
        let onExt4 = try run(reference.path)
        let outside = onMount.filter { $0.hasPrefix("s ") || $0.hasPrefix("empty ") }
        #expect(outside.count == 20)
        #expect(outside == onExt4.filter { $0.hasPrefix("s ") || $0.hasPrefix("empty ") }, "mount:\n\(outside.joined(separator: "\n"))")
        #expect(outside.allSatisfy { $0.hasSuffix(" ENXIO") }, "\(outside.filter { !$0.hasSuffix(" ENXIO") })")
        let checks = onMount.filter { $0.hasPrefix("check ") }
        #expect(checks.count > 40)
        #expect(checks.allSatisfy { $0.hasSuffix(" ok") }, "\(checks.filter { !$0.hasSuffix(" ok") })")
        // In the gap between the two data blocks the mount reports a hole at the offset and data
        // not before 1 MiB (block granular, so possibly a little earlier than ext4); past the
        // last data SEEK_DATA is ENXIO, as on ext4.
        #expect(onMount.contains("found 300000 1048576 300000") || onMount.contains { line in
            let f = line.split(separator: " ")
            return f.count == 4 && f[0] == "found" && f[1] == "300000" && (Int(f[2]) ?? 0) > 300000 && (Int(f[2]) ?? .max) <= 1 << 20 && f[3] == "300000"
        }, "\(onMount.filter { $0.hasPrefix("found") })")
        #expect(onMount.contains("found 2097152 ENXIO 2097152"), "\(onMount.filter { $0.hasPrefix("found") })")
        #expect(onExt4.contains("found 300000 1048576 300000") && onExt4.contains("found 2097152 ENXIO 2097152"))
    }

    /// Block-aligned layouts where a stored block shares backing blocks with a written
    /// neighbour: one block written far into a file (xfstests seek_sanity_test 19, generic/490
    /// and 539), and an unwritten block between two written ones. Prints the answers.
    static let neighbourScript = #"""
    import os, sys
    os.chdir(sys.argv[1])
    bs = 4096
    far = os.open("far", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(far, b"a" * bs, 1036 * bs)
    between = os.open("between", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(between, b"b" * bs, 10 * bs)
    os.pwrite(between, b"c" * bs, 12 * bs)
    os.fsync(far); os.fsync(between)
    for offset in [bs, 12 * bs, 1028 * bs, 1035 * bs]:
        print("far SEEK_DATA", offset, os.lseek(far, offset, os.SEEK_DATA))
    print("far SEEK_HOLE", 0, os.lseek(far, 0, os.SEEK_HOLE))
    for offset in [0, 10 * bs, 11 * bs]:
        print("between SEEK_DATA", offset, os.lseek(between, offset, os.SEEK_DATA))
    for offset in [0, 10 * bs, 11 * bs, 12 * bs]:
        print("between SEEK_HOLE", offset, os.lseek(between, offset, os.SEEK_HOLE))
    """#

    @Test("A block sharing backing blocks with a written neighbour is a hole, as on ext4 (seek_sanity_test 19)",
          arguments: MountedFixture.Kind.allCases)
    func neighbourBlocksMatchExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind) { m, reference in
            let onMount = try m.python(Self.neighbourScript, in: m.mountpoint)
            let onExt4 = try m.python(Self.neighbourScript, in: reference.path)
            #expect(onMount.status == 0 && onExt4.status == 0, "\(onMount.err) \(onExt4.err)")
            #expect(onExt4.out.contains("far SEEK_DATA 4096 4243456\n"), "\(onExt4.out)")
            #expect(onMount.out == onExt4.out, "mount:\n\(onMount.out)ext4:\n\(onExt4.out)")
        }
    }
}
