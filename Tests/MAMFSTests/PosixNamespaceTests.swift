import Foundation
import Glibc
import Testing
import MAMTestSupport

/// renameat2 RENAME_WHITEOUT (what overlayfs needs of its upper filesystem) and O_TMPFILE
/// through a real mount.
@Suite("POSIX: RENAME_WHITEOUT, overlayfs on top, O_TMPFILE")
struct PosixNamespaceTests {
    /// argv: a directory. Prints one line per renameat2 call: the flags, the result (ok or the
    /// errno name), then what the old and the new name are afterwards.
    static let whiteoutScript = #"""
    import ctypes, errno, os, stat, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    NOREPLACE, EXCHANGE, WHITEOUT = 1, 2, 4
    os.chdir(sys.argv[1])

    def describe(name):
        try:
            st = os.lstat(name)
        except OSError as e:
            return errno.errorcode[e.errno]
        if stat.S_ISCHR(st.st_mode):
            return "chr %d:%d %o" % (os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode))
        with open(name) as f:
            return "file " + f.read().strip()

    def attempt(old, new, flags):
        rc = libc.renameat2(-100, old.encode(), -100, new.encode(), flags)
        result = "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
        print(flags, result, old, describe(old), new, describe(new), flush=True)

    for name, text in [("a", "one"), ("b", "two"), ("c", "three")]:
        with open(name, "w") as f:
            f.write(text)
    attempt("a", "moved", WHITEOUT)
    attempt("b", "c", WHITEOUT | NOREPLACE)
    attempt("b", "c", WHITEOUT | EXCHANGE)
    attempt("b", "c", WHITEOUT)
    attempt("missing", "x", WHITEOUT)
    """#

    @Test("RENAME_WHITEOUT moves the file and leaves a 0:0 character device, as on ext4", arguments: MountedFixture.Kind.allCases)
    func whiteoutMatchesExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind) { m, reference in try Self.compareWhiteouts(kind, m, reference) }
    }

    static func compareWhiteouts(_ kind: MountedFixture.Kind, _ m: MountedFixture, _ reference: Ext4Reference) throws {
        let onMount = try m.python(Self.whiteoutScript, in: m.mountpoint)
        let onExt4 = try m.python(Self.whiteoutScript, in: reference.path)
        #expect(onMount.status == 0, "\(onMount.err)")
        #expect(onMount.out == onExt4.out, "mount:\n\(onMount.out)\next4:\n\(onExt4.out)")
        #expect(onMount.out == """
            4 ok a chr 0:0 0 moved file one
            5 EEXIST b file two c file three
            6 EINVAL b file two c file three
            4 ok b chr 0:0 0 c file two
            4 ENOENT missing ENOENT x ENOENT

            """, "\(onMount.out)")
        // The whiteout is a backing object too (what a later lookup finds).
        var st = stat()
        #expect(lstat(m.backing + "/a", &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR && st.st_rdev == 0)
        if kind == .managed {
            #expect(try m.backingHeader("moved")?.isEncrypted == true, "the moved file is still encrypted")
        }
    }

    @Test("overlayfs mounts with its upper directory on the mount: removing and renaming lower files leaves whiteouts",
          arguments: MountedFixture.Kind.allCases)
    func overlayfsOnTop(kind: MountedFixture.Kind) throws {
        let m = try MountedFixture(kind)
        defer { m.close() }
        let lower = m.base + "/lower"
        let merged = m.base + "/merged"
        try FileManager.default.createDirectory(atPath: lower, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: merged, withIntermediateDirectories: true)
        let mount = try m.sh("""
        echo gone > "$BASE/lower/gone" && echo kept > "$BASE/lower/kept" && mkdir upper work && \
        mount -t overlay overlay -o "lowerdir=$BASE/lower,upperdir=$M/upper,workdir=$M/work" "$BASE/merged"
        """)
        defer { _ = try? shell("umount \(shellQuote(merged)) 2>/dev/null || umount -l \(shellQuote(merged)) 2>/dev/null") }
        #expect(mount.status == 0, "overlayfs refused the mount as its upper filesystem: \(mount.err)")
        guard mount.status == 0 else { return }
        let r = try m.sh("""
        cd "$BASE/merged" && rm gone && mv kept renamed && echo new > new && ls && cat renamed new && \
        stat -c '%F %t:%T' "$M/upper/gone" "$M/upper/kept" && cat "$M/upper/renamed"
        """)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out == "new\nrenamed\nkept\nnew\ncharacter special file 0:0\ncharacter special file 0:0\nkept\n", "\(r.out)")
        #expect(try shell("umount \(shellQuote(merged))").status == 0)
        // The lower directory is untouched.
        #expect(try shell("cat \(shellQuote(lower))/gone \(shellQuote(lower))/kept").out == "gone\nkept\n")
    }

    @Test("O_TMPFILE answers EOPNOTSUPP (libfuse 3.14 has no tmpfile operation) and leaves nothing behind",
          arguments: MountedFixture.Kind.allCases)
    func tmpfileIsUnsupported(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            mkdir d && python3 - <<'EOF'
            import errno, os
            for flags in (os.O_TMPFILE | os.O_RDWR, os.O_TMPFILE | os.O_WRONLY | os.O_EXCL):
                try:
                    fd = os.open("d", flags, 0o600)
                    print("opened")
                    os.close(fd)
                except OSError as e:
                    print(errno.errorcode[e.errno])
            EOF
            ls -A d; ls -A "$B/d"; echo after > d/f && cat d/f
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "ENOTSUP\nENOTSUP\nafter\n", "\(r.out)")
        }
    }
}
