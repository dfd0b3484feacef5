import Foundation
import Glibc
import Testing
import MAMTestSupport

/// File capabilities (`security.capability`) after a content change. The mount tells the kernel
/// it drops set-ID bits and capabilities itself (FUSE_HANDLE_KILLPRIV_V2, added to the INIT reply
/// by the session's transport), so the kernel no longer asks for `security.capability` before
/// every write; what the kernel stopped doing, the daemon's writes to the backing file do.
@Suite("POSIX: file capabilities after content changes; the kernel's capability checks")
struct FileCapabilityTests {
    /// argv: a directory. For every operation and writer (root; user nobody on a 0666 file),
    /// root makes a file with a capability, the writer changes its content, and a line
    /// "<op> <writer> kept|dropped|failed" is printed.
    static let script = #"""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    # cap_net_raw+ep, version 2 (what setcap writes).
    CAPABILITY = bytes([1, 0, 0, 2, 0, 0x20, 0, 0] + [0] * 12)
    def change(path, op):
        if op == "otrunc":
            os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
            return
        fd = os.open(path, os.O_RDWR)
        try:
            if op == "write": os.pwrite(fd, b"x" * 10, 4096)
            elif op == "ftruncate": os.ftruncate(fd, 100)
            elif op == "falloc":
                if libc.fallocate(fd, 0, 65536, 65536) != 0: raise OSError(ctypes.get_errno(), "fallocate")
        finally:
            os.close(fd)
    root = sys.argv[1]
    for op in ("write", "ftruncate", "otrunc", "falloc"):
        for who in ("root", "other"):
            path = os.path.join(root, "%s-%s" % (op, who))
            with open(path, "wb") as f:
                f.write(b"X" * 16384)
            os.chmod(path, 0o666)
            os.setxattr(path, "security.capability", CAPABILITY)
            pid = os.fork()
            if pid == 0:
                try:
                    if who != "root":
                        os.setgroups([])
                        os.setregid(65534, 65534)
                        os.setreuid(65534, 65534)
                    change(path, op)
                    os._exit(0)
                except BaseException as error:
                    print("error", op, who, error, file=sys.stderr)
                    os._exit(1)
            _, status = os.waitpid(pid, 0)
            try:
                kept = os.getxattr(path, "security.capability") == CAPABILITY
            except OSError:
                kept = False
            print(op, who, "failed" if status else ("kept" if kept else "dropped"))
    """#

    @Test("write, ftruncate, O_TRUNC and fallocate by root and by another user drop a file's capability, as on ext4",
          .enabled(if: geteuid() == 0, "sets security.capability and acts as user nobody"), arguments: MountedFixture.Kind.allCases)
    func capabilityDroppedAsOnExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind, options: ["allow_other"]) { m, reference in
            let (mount, ext4) = try m.linesOnMountAndExt4(Self.script, reference)
            #expect(mount.count == 4 * 2)
            #expect(mount == ext4, "mount: \(mount)\next4: \(ext4)")
            #expect(mount.contains("write other dropped") && mount.contains("write root dropped"), "\(mount)")
        }
    }

    @Test("Ten writes to a new file ask the daemon for security.capability at most once (FUSE_HANDLE_KILLPRIV_V2)",
          .enabled(if: FuseRequestTrace.isAvailable, "needs root and the fuse_request_send tracepoint (kernel 6.14+)"),
          .serialized, arguments: MountedFixture.Kind.allCases)
    func capabilityAskedOnce(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try FuseRequestTrace.count(m, while: """
            python3 -c 'import os
            fd = os.open("f", os.O_WRONLY | os.O_CREAT, 0o644)
            for _ in range(10): os.write(fd, b"x" * 100)
            os.close(fd)'
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.requests["FUSE_WRITE"] == 10, "\(r.requests)")
            #expect((r.requests["FUSE_GETXATTR"] ?? 0) <= 1, "\(r.requests)")
            #expect(try String(contentsOfFile: m.mountpoint + "/f", encoding: .utf8) == String(repeating: "x", count: 1000))
        }
    }
}
