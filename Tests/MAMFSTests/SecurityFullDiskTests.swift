import Foundation
import Glibc
import Testing
import MAMTestSupport

/// A fallocate or write that fails with ENOSPC gives back the space it reserved on the backing
/// filesystem: nothing stays allocated past the end of the file.
@Suite("Security: a failed reservation on a full disk is released")
struct SecurityFullDiskTests {
    /// argv: the backing file of "f", the small filesystem, and "fallocate" or "write". Fills the
    /// filesystem (a file outside the backing directory) so that the operation through the mount
    /// fails with ENOSPC; prints "<op> <errno> <backing st_blocks before> <after> <free blocks before> <after>".
    static let script = #"""
    import errno, os, sys
    backing_file, disk, operation = sys.argv[1], sys.argv[2], sys.argv[3]
    fd = os.open("f", os.O_RDWR)

    def free_bytes():
        # f_bavail: without the clusters ext4 keeps back for metadata (no write gets those).
        st = os.statvfs(disk)
        return st.f_bavail * st.f_frsize

    def measure():
        os.sync()
        return os.stat(backing_file).st_blocks, os.statvfs(disk).f_bfree

    def fill_leaving(n, name):
        # Write until ENOSPC, then give back exactly n bytes.
        filler = os.open(os.path.join(disk, name), os.O_RDWR | os.O_CREAT, 0o600)
        for chunk in [1 << 20, 4096]:
            try:
                while True:
                    os.write(filler, bytes(chunk))
            except OSError:
                pass
        os.fsync(filler)
        os.ftruncate(filler, os.fstat(filler).st_size - n)
        os.fsync(filler)
        os.close(filler)

    def attempt(op, fn):
        blocks, free = measure()
        try:
            fn()
            code = "ok"
        except OSError as e:
            code = errno.errorcode.get(e.errno, str(e.errno))
        blocks2, free2 = measure()
        print(op, code, blocks, blocks2, free, free2, flush=True)

    if operation == "fallocate":
        fill_leaving(16 << 20, "filler")
        attempt("fallocate", lambda: os.posix_fallocate(fd, 129, free_bytes() + (1 << 20)))
    else:
        # Page-aligned and less than one write request: the kernel sends the whole write at
        # once (an unaligned one is split at the page boundary, and its first part fits).
        fill_leaving(32 << 10, "filler")
        attempt("write", lambda: os.pwrite(fd, b"y" * (128 << 10), 4096))
    os.close(fd)
    """#

    @Test("fallocate or write past the free space: ENOSPC, st_blocks and free space as before",
          arguments: MountedFixture.Kind.allCases, ["fallocate", "write"])
    func failedReservationIsReleased(kind: MountedFixture.Kind, operation: String) throws {
        let disk = try SmallFilesystem(.ext4)
        defer { disk.close() }
        let m = try MountedFixture(kind, backing: disk.path + "/backing")
        defer { m.close() }
        let content = String(repeating: "x", count: 129)
        let setup = try m.sh("printf '\(content)' > f")
        #expect(setup.status == 0, "\(setup.err)")
        let r = try m.sh("python3 - \"$B/f\" \(shellQuote(disk.path)) \(operation) <<'EOF'\n" + SecurityFullDiskTests.script + "\nEOF", timeout: 120)
        let lines = r.out.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(lines.map { $0.first ?? "" } == [operation], "\(r.out) \(r.err)")
        for line in lines where line.count == 6 {
            #expect(line[1] == "ENOSPC", "\(line.joined(separator: " "))")
            let blocks = (Int(line[2]) ?? -1, Int(line[3]) ?? -1)
            let free = (Int(line[4]) ?? -1, Int(line[5]) ?? -1)
            // Sectors of 512 bytes: within one 4 KiB block.
            #expect(abs(blocks.1 - blocks.0) <= 8, "\(line[0]): backing st_blocks \(blocks.0) -> \(blocks.1)")
            #expect(abs(free.1 - free.0) <= 1, "\(line[0]): free blocks \(free.0) -> \(free.1)")
        }
        let read = try m.sh("cat f")
        #expect(read.out == content, "\(read.err)")
    }
}
