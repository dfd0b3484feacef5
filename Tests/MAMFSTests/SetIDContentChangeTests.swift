import Foundation
import Glibc
import Testing
import MAMTestSupport

/// Set-user-ID and set-group-ID bits after a content change by a user other than root
/// (xfstests generic/683, 684, 685): write, ftruncate, O_TRUNC, fallocate, punch hole and zero
/// range each clear S_ISUID, and S_ISGID when the file has group execute or the writer is not in
/// the file's group; root keeps both. The same modes as on ext4, through an `allow_other` mount
/// whose daemon runs as root (the kernel's FUSE module alone keeps S_ISGID of a file without
/// group execute).
@Suite("POSIX: set-ID bits after content changes, mount vs ext4")
struct SetIDContentChangeTests {
    /// argv: a directory. For every operation, starting mode and writer (root, a member of the
    /// file's group 100, a user outside it; the two are user nobody), root makes a 192 KiB file
    /// with that mode and group 100, the writer changes its content, and a line
    /// "<op> <mode before> <writer> <mode after>" is printed (mode after read by a fresh lstat).
    static let script = #"""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    def fallocate(fd, mode, offset, length):
        if libc.fallocate(fd, mode, offset, length) != 0:
            raise OSError(ctypes.get_errno(), "fallocate")
    def change(path, op):
        if op == "otrunc":
            os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
            return
        fd = os.open(path, os.O_RDWR)
        try:
            if op == "write": os.pwrite(fd, b"x" * 10, 4096)
            elif op == "ftruncate": os.ftruncate(fd, 100)
            elif op == "falloc": fallocate(fd, 0, 65536, 65536)
            elif op == "punch": fallocate(fd, 0x01 | 0x02, 0, 4096)
            elif op == "zero": fallocate(fd, 0x10, 0, 4096)
        finally:
            os.close(fd)
    root = sys.argv[1]
    for op in ("write", "ftruncate", "otrunc", "falloc", "punch", "zero"):
        for mode in (0o6666, 0o6676, 0o6766, 0o6777, 0o2676, 0o2666, 0o4666):
            for who in ("root", "member", "other"):
                path = os.path.join(root, "%s-%o-%s" % (op, mode, who))
                with open(path, "wb") as f:
                    f.write(b"X" * 196608)
                os.chown(path, 0, 100)
                os.chmod(path, mode)
                pid = os.fork()
                if pid == 0:
                    try:
                        if who != "root":
                            os.setgroups([100] if who == "member" else [])
                            os.setregid(65534, 65534)
                            os.setreuid(65534, 65534)
                        change(path, op)
                        os._exit(0)
                    except BaseException as error:
                        print("error", op, oct(mode), who, error, file=sys.stderr)
                        os._exit(1)
                _, status = os.waitpid(pid, 0)
                print(op, oct(mode), who, "failed" if status else oct(os.lstat(path).st_mode & 0o7777))
    """#

    @Test("write, ftruncate, O_TRUNC, fallocate, punch and zero range by root, a member and a non-member: the same set-ID bits as ext4",
          .enabled(if: geteuid() == 0, "acts as user nobody"), arguments: MountedFixture.Kind.allCases)
    func setIDBitsMatchExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind, options: ["allow_other"]) { m, reference in
            let (mount, ext4) = try m.linesOnMountAndExt4(Self.script, reference)
            #expect(mount.count == 6 * 7 * 3)
            #expect(mount == ext4, "mount vs ext4:\n\(zip(mount, ext4).filter { $0 != $1 }.map { "\($0)  |  \($1)" }.joined(separator: "\n"))")
            // What ext4 answers, spelled out for the cases the kernel's FUSE module leaves to the daemon.
            let expected = ["write", "ftruncate", "otrunc", "falloc", "punch", "zero"].flatMap { op in
                ["\(op) 0o6666 other 0o666", "\(op) 0o6666 member 0o2666", "\(op) 0o2666 other 0o666",
                 "\(op) 0o6766 other 0o766", "\(op) 0o6676 member 0o676", "\(op) 0o6666 root 0o6666"]
            }
            #expect(expected.filter { !mount.contains($0) } == [])
            // The backing file holds the same mode, and a managed file stays encrypted.
            var st = stat()
            #expect(lstat(m.backing + "/falloc-6666-other", &st) == 0 && st.st_mode & 0o7777 == 0o666)
            if kind == .managed {
                #expect(try m.backingHeader("write-6666-other")?.isEncrypted == true)
            }
        }
    }
}
