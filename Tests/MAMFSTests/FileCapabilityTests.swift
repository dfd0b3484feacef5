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

    static var hasFuseTracepoint: Bool {
        if access("/sys/kernel/tracing/events/fuse/fuse_request_send", F_OK) != 0 {
            _ = try? shell("mount -t tracefs nodev /sys/kernel/tracing")
        }
        return access("/sys/kernel/tracing/events/fuse/fuse_request_send/enable", W_OK) == 0
    }

    @Test("Ten writes to a new file ask the daemon for security.capability at most once (FUSE_HANDLE_KILLPRIV_V2)",
          .enabled(if: geteuid() == 0 && hasFuseTracepoint, "needs root and the fuse_request_send tracepoint (kernel 6.14+)"),
          .serialized, arguments: MountedFixture.Kind.allCases)
    func capabilityAskedOnce(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            // The requests the kernel sends to this mount's connection (the tracepoint's
            // connection is the kernel's dev_t of the mount: major << 20 | minor). The
            // tracepoint's filter and buffer are the machine's: the cases run one at a time.
            let r = try m.sh(#"""
            T=/sys/kernel/tracing; E=$T/events/fuse/fuse_request_send
            dev=$(python3 -c 'import os, sys; d = os.stat(sys.argv[1]).st_dev; print((os.major(d) << 20) | os.minor(d))' "$M")
            trap 'echo 0 > $E/enable; echo 0 > $E/filter' EXIT
            echo "connection == $dev" > $E/filter && echo > $T/trace && echo 1 > $E/enable
            python3 -c 'import os
            fd = os.open("f", os.O_WRONLY | os.O_CREAT, 0o644)
            for _ in range(10): os.write(fd, b"x" * 100)
            os.close(fd)'
            echo 0 > $E/enable
            echo "writes $(grep -c 'connection '"$dev"' .*FUSE_WRITE' $T/trace) getxattr $(grep -c 'connection '"$dev"' .*FUSE_GETXATTR' $T/trace)"
            """#)
            #expect(r.status == 0, "\(r.err)")
            let fields = r.out.split(whereSeparator: { $0 == " " || $0 == "\n" })
            #expect(fields.count == 4, "\(r.out)")
            guard fields.count == 4, let writes = Int(fields[1]), let getxattrs = Int(fields[3]) else { return }
            #expect(writes == 10, "\(r.out)")
            #expect(getxattrs <= 1, "\(r.out)")
            #expect(try String(contentsOfFile: m.mountpoint + "/f", encoding: .utf8) == String(repeating: "x", count: 1000))
        }
    }
}
