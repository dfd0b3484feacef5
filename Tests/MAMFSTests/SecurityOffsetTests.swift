import Foundation
import Glibc
import Testing

/// Offsets and sizes near 2^63 from any user of a mount are answered with an errno (EFBIG,
/// EINVAL, ...), never an arithmetic trap that kills the daemon for everyone.
@Suite("Security: offsets near 2^63 through a real mount")
struct SecurityOffsetTests {
    /// Tries write, truncate, fallocate, lseek, pread, copy_file_range and a directory read at
    /// offsets and lengths near the off_t limits; prints one "<op> <offset> <length> <result>"
    /// line each (result: ok or the errno name), then "keep <bytes>" after reading back a file.
    static let script = #"""
    import ctypes, errno, os
    S63 = 2**63
    offsets = [S63 - 1, S63 - 2, S63 - 4096, S63 - 4097, S63 - 4124 * 1024, 2**62, 2**62 + 1, 2**40, -1, -4096]
    lengths = [1, 4096, 5000, S63 - 1, 2**62, -1]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def name(e):
        return errno.errorcode.get(e, str(e))

    def attempt(op, offset, length, fn):
        try:
            fn()
            result = "ok"
        except OSError as e:
            result = name(e.errno)
        print(op, offset, length, result, flush=True)

    with open("keep", "wb") as f:
        f.write(b"hello world")
    with open("src", "wb") as f:
        f.write(b"source bytes")
    os.mkdir("dir")
    for i in range(3):
        open("dir/e%d" % i, "wb").close()
    fd = os.open("t", os.O_RDWR | os.O_CREAT, 0o644)
    src = os.open("src", os.O_RDONLY)

    def reset():
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"0123456789", 0)

    for off in offsets:
        for n in [1, 4096, 5000]:
            attempt("pwrite", off, n, lambda: (reset(), os.pwrite(fd, b"x" * n, off)))
        attempt("ftruncate", off, 0, lambda: (reset(), os.ftruncate(fd, off)))
        attempt("truncate", off, 0, lambda: (reset(), os.truncate("t", off)))
        for length in lengths:
            attempt("fallocate", off, length, lambda: (reset(), os.posix_fallocate(fd, off, length)))
        attempt("fallocate", 0, off, lambda: (reset(), os.posix_fallocate(fd, 0, off)))
        attempt("seek_data", off, 0, lambda: (reset(), os.lseek(fd, off, os.SEEK_DATA)))
        attempt("seek_hole", off, 0, lambda: (reset(), os.lseek(fd, off, os.SEEK_HOLE)))
        attempt("pread", off, 4096, lambda: (reset(), os.pread(fd, 4096, off)))
        for n in [5, S63 - 1]:
            attempt("copy_to", off, n, lambda: (reset(), os.copy_file_range(src, fd, n, 0, off)))
            attempt("copy_from", off, n, lambda: (reset(), os.copy_file_range(src, fd, n, off, 0)))
        def read_directory_at(offset):
            d = os.open("dir", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.lseek(d, offset, os.SEEK_SET)
                buffer = ctypes.create_string_buffer(8192)
                if libc.syscall(217, d, buffer, 8192) < 0:
                    raise OSError(ctypes.get_errno(), "getdents64")
            finally:
                os.close(d)
        attempt("getdents", off, 0, lambda: read_directory_at(off))
    os.close(fd)
    with open("keep", "rb") as f:
        print("keep", f.read().decode(), flush=True)
    """#

    static let allowed: Set<String> = ["ok", "EFBIG", "EINVAL", "ENOSPC", "EOVERFLOW", "ENXIO"]

    @Test("write/truncate/fallocate/lseek/copy_file_range/readdir at offsets near 2^63 answer an errno; the daemon lives",
          arguments: MountedFixture.Kind.allCases)
    func offsetsNearTheLimitAreErrors(kind: MountedFixture.Kind) throws {
        // A small tmpfs backing: its own size limit is 2^63-1, so every offset reaches the daemon,
        // and any allocation fails fast with ENOSPC instead of filling a real disk.
        let disk = try SmallFilesystem(.tmpfs)
        defer { disk.close() }
        let m = try MountedFixture(kind, backing: disk.path + "/backing")
        defer { m.close() }
        do {
            let r = try m.sh("python3 - <<'EOF'\n" + SecurityOffsetTests.script + "\nEOF", timeout: 240)
            let lines = r.out.split(separator: "\n").map(String.init)
            let results = lines.filter { !$0.hasPrefix("keep ") }.map { $0.split(separator: " ").map(String.init) }
            #expect(results.count == 200, "the script stopped early: \(r.out.suffix(400)) \(r.err.suffix(600))")
            let unexpected = results.filter { $0.count != 4 || !SecurityOffsetTests.allowed.contains($0[3]) }
            #expect(unexpected.isEmpty, "unexpected results: \(unexpected.prefix(12).map { $0.joined(separator: " ") })")
            // Past the largest file the format can store: EFBIG, as ext4 answers past its own.
            for line in results where ["ftruncate", "truncate"].contains(line[0]) && line[1] == "\(Int64.max)" {
                #expect(line[3] == "EFBIG", "\(line.joined(separator: " "))")
            }
            // An encrypted file ends before off_t does: one byte there is past its maximum too.
            for line in results where kind == .managed && line[0] == "pwrite" && line[1] == "\(Int64.max - 4095)" && line[2] == "1" {
                #expect(line[3] == "EFBIG", "\(line.joined(separator: " "))")
            }
            #expect(lines.last == "keep hello world", "after the fuzz: \(lines.suffix(3)) \(r.err.suffix(600))")
            if let pid = m.daemonPID {
                #expect(kill(pid, 0) == 0, "the daemon died")
            } else {
                #expect(MountedFixture.useInProcess, "no daemon serves the mount any more")
            }
            let again = try m.sh("cat keep && echo more > fresh && cat fresh")
            #expect(again.out == "hello worldmore\n", "\(again.err)")
        }
    }
}
