import Foundation
import Testing
import MAMProtection
import MAMTestSupport

/// The mamfs attributes in attribute lists: `user.mam.owner` and `user.mam.encrypted` are listed
/// for files and directories with a non-empty owner, setting or removing them to what they
/// already are changes nothing, and copying tools that copy the list (cp -a, rsync -X) keep
/// working and give the copy its owner.
@Suite("Extended attribute listing through the mount")
struct XattrListingTests {
    /// Runs a python3 script in the mountpoint (sys.argv[1] = mountpoint, environment as `sh`).
    private func python(_ m: MountedFixture, _ code: String) throws -> ProcessResult {
        let script = m.base + "/xattr-\(UUID().uuidString.prefix(8)).py"
        try Data(code.utf8).write(to: URL(fileURLWithPath: script))
        return try m.sh("python3 \(shellQuote(script)) \"$M\"")
    }

    @Test("getfattr -d, gio and listxattr show the owner and encryption of owned files and tagged directories, nothing for unowned ones",
          arguments: MountedFixture.Kind.allCases)
    func listed(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            echo data > f && setfattr -n user.x -v 1 f && mkdir d tagged && setfattr -n user.mam.owner -v "$ACCT" tagged && \
            printf 'raw\\n' > "$B/untagged" && echo p > personal && setfattr -n user.mam.owner -v '' personal && \
            getfattr -d f d tagged untagged personal && echo "--" && \
            python3 -c 'import os; print(os.listxattr("f")); print(os.listxattr("tagged")); print(os.listxattr("untagged"))' && \
            gio info -a 'xattr::*' f 2>/dev/null | grep 'xattr::' | sort
            """)
            #expect(r.status == 0, "\(r.err)")
            let account = MountedFixture.account
            let fileAttributes = m.isManaged ? "user.mam.encrypted=\"1\"\nuser.mam.owner=\"\(account)\"\n" : ""
            let fileList = m.isManaged ? "['user.mam.owner', 'user.mam.encrypted', 'user.x']" : "['user.x']"
            let gio = (m.isManaged ? "  xattr::mam.encrypted: 1\n  xattr::mam.owner: \(account)\n" : "") + "  xattr::x: 1\n"
            #expect(r.out == """
            # file: f
            \(fileAttributes)user.x="1"

            # file: tagged
            user.mam.encrypted="0"
            user.mam.owner="\(account)"

            --
            \(fileList)
            ['user.mam.owner', 'user.mam.encrypted']
            []
            \(gio)
            """, "\(r.out)")
        }
    }

    @Test("listxattr answers its size for a size-0 probe, the list for that size, ERANGE for one byte less; getxattr likewise")
    func probeAndRange() throws {
        try withMount(.managed) { m in
            let r = try python(m, """
            import ctypes, errno, os, sys
            os.chdir(sys.argv[1])
            libc = ctypes.CDLL(None, use_errno=True)
            open("f", "w").write("data\\n")
            def listing(size):
                buf = ctypes.create_string_buffer(max(size, 1))
                n = libc.listxattr(b"f", buf if size else None, size)
                return n, (buf.raw[:n] if n > 0 and size else b""), ctypes.get_errno()
            probe, _, _ = listing(0)
            full, names, _ = listing(probe)
            short, _, err = listing(probe - 1)
            print(probe, full, names.split(b"\\0")[:-1], short, errno.errorcode[err])
            buf = ctypes.create_string_buffer(64)
            size = libc.getxattr(b"f", b"user.mam.owner", None, 0)
            got = libc.getxattr(b"f", b"user.mam.owner", buf, size)
            small = libc.getxattr(b"f", b"user.mam.owner", buf, size - 1)
            print(size, got, buf.raw[:got].decode(), small, errno.errorcode[ctypes.get_errno()])
            """)
            #expect(r.status == 0, "\(r.err)")
            let listSize = "user.mam.owner\0user.mam.encrypted\0".utf8.count
            let account = MountedFixture.account
            #expect(r.out == "\(listSize) \(listSize) [b'user.mam.owner', b'user.mam.encrypted'] -1 ERANGE\n\(account.utf8.count) \(account.utf8.count) \(account) -1 ERANGE\n")
        }
    }

    @Test("setting user.mam.owner or user.mam.encrypted to its current value changes nothing; user.mam.encrypted=0 on an encrypted file and 1 on a directory are EPERM, a value other than 0 and 1 EINVAL; removing them is a no-op only where the owner would stay the same")
    func settingAndRemovingCurrentValues() throws {
        try withMount(.managed) { m in
            let r = try python(m, """
            import errno, os, sys
            os.chdir(sys.argv[1])
            acct = os.environ["ACCT"].encode()
            def attempt(call, *args):
                try:
                    call(*args); return "ok"
                except OSError as e:
                    return errno.errorcode[e.errno]
            open("f", "w").write("work\\n")
            os.mkdir("w"); os.setxattr("w", "user.mam.owner", acct)
            open("w/p", "w").write("personal\\n"); os.setxattr("w/p", "user.mam.owner", b"")
            os.mkdir("pers"); os.setxattr("pers", "user.mam.owner", b"")
            open("pers/work", "w").write("work\\n"); os.setxattr("pers/work", "user.mam.owner", acct)
            before = os.stat(os.environ["B"] + "/f").st_ino
            print(attempt(os.setxattr, "f", "user.mam.owner", acct), attempt(os.setxattr, "w", "user.mam.owner", acct),
                  os.getxattr("w/p", "user.mam.owner"), os.stat(os.environ["B"] + "/f").st_ino == before)
            print(attempt(os.setxattr, "f", "user.mam.encrypted", b"1"), attempt(os.setxattr, "f", "user.mam.encrypted", b"0"),
                  attempt(os.setxattr, "w", "user.mam.encrypted", b"0"), attempt(os.setxattr, "w", "user.mam.encrypted", b"1"),
                  attempt(os.setxattr, "pers/work", "user.mam.encrypted", b"yes"))
            print(attempt(os.removexattr, "f", "user.mam.owner"), attempt(os.removexattr, "f", "user.mam.encrypted"),
                  attempt(os.removexattr, "w", "user.mam.owner"), attempt(os.removexattr, "w/p", "user.mam.owner"),
                  attempt(os.removexattr, "pers/work", "user.mam.owner"), attempt(os.removexattr, "pers/work", "user.mam.encrypted"))
            open(os.environ["B"] + "/untagged", "w").write("raw\\n")
            print(attempt(os.removexattr, "untagged", "user.mam.owner"), os.listxattr("f"), os.getxattr("w", "user.mam.owner") == acct,
                  os.getxattr("pers/work", "user.mam.owner") == acct, os.getxattr("w/p", "user.mam.owner"))
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == """
            ok ok b'' True
            ok EPERM ok EPERM EINVAL
            ok ok ok EPERM EPERM EPERM
            ENODATA ['user.mam.owner', 'user.mam.encrypted'] True True b''

            """, "\(r.out)")
            #expect(try m.backingHeader("w/p").map { $0.owner.isEmpty && !$0.isEncrypted } == true,
                    "setting the directory's own owner again does not re-protect what is below it")
            let context = try ProtectionContext.open(stateDirectory: StateDirectory(path: m.state), passphraseFile: nil)
            let roots = try context.state.knownRoots().map(\.path)
            #expect(!roots.contains(m.backing + "/f"), "a no-op owner change records no protected root: \(roots)")
        }
    }

    @Test("cp -a and rsync -aX copy a work file within the mount and through tmpfs back into it: exit 0, same bytes, the copy owned by the work account")
    func copiesKeepTheWorkOwner() throws {
        let shm = "/dev/shm/mamfs-xattr-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: shm) }
        try withMount(.managed) { m in
            let r = try m.sh("""
            set -e
            [ "$(stat -f -c %T /dev/shm)" = tmpfs ]
            head -c 200000 /dev/urandom > "$BASE/src.bin"
            mkdir -p work pers \(shellQuote(shm)) && setfattr -n user.mam.owner -v '' pers
            cp "$BASE/src.bin" work/w.bin && echo personal > pers/p
            cp -a work/w.bin cpa.bin && rsync -aX work/w.bin rsync.bin && cp -a work/w.bin pers/cpa.bin
            cp -a work \(shellQuote(shm))/cpa-dir && rsync -aX work/w.bin \(shellQuote(shm))/rs.bin
            getfattr -d \(shellQuote(shm))/rs.bin | tail -n +2
            cp -a \(shellQuote(shm))/cpa-dir back-dir && rsync -aX \(shellQuote(shm))/rs.bin back-rs.bin
            cp -a pers/p p-cp && rsync -aX pers/p p-rs
            for f in cpa.bin rsync.bin pers/cpa.bin back-dir/w.bin back-rs.bin; do cmp "$BASE/src.bin" "$f"; done
            cat p-cp p-rs
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "user.mam.encrypted=\"1\"\nuser.mam.owner=\"\(MountedFixture.account)\"\n\npersonal\npersonal\n", "\(r.out)")
            for name in ["cpa.bin", "rsync.bin", "pers/cpa.bin", "back-dir/w.bin", "back-rs.bin", "p-cp", "p-rs"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name): \(String(describing: header))")
            }
            #expect(try m.backingHeader("pers/p").map { $0.owner.isEmpty } == true)
        }
    }

    @Test("cp -a of a work file within an unmanaged mount and through tmpfs back: exit 0, same bytes, the copy owned by the work account; a personal file's copy gets no owner")
    func copiesInAnUnmanagedMount() throws {
        let shm = "/dev/shm/mamfs-xattr-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: shm) }
        try withMount(.unmanaged) { m in
            let r = try m.sh("""
            set -e
            head -c 50000 /dev/urandom > "$BASE/src.bin"
            cp "$BASE/src.bin" w.bin && setfattr -n user.mam.owner -v "$ACCT" w.bin && echo personal > p && mkdir -p \(shellQuote(shm))
            cp -a w.bin cpa.bin && cp -a w.bin \(shellQuote(shm))/w.bin && cp -a \(shellQuote(shm))/w.bin back.bin
            cp -a p p-cp && rsync -aX p p-rs
            for f in cpa.bin back.bin; do cmp "$BASE/src.bin" "$f"; done
            getfattr -d p-cp p-rs | wc -c
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "0\n")
            for name in ["cpa.bin", "back.bin"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name)")
            }
            for name in ["p-cp", "p-rs"] {
                #expect(try m.backingHeader(name).map { $0.owner.isEmpty && !$0.isEncrypted } == true, "\(name)")
            }
        }
    }

    @Test("getxattr answers the entry's own attributes after its name was taken over behind the mount; a value over 256 bytes whole, ENODATA for none",
          arguments: MountedFixture.Kind.allCases)
    func attributesOfTheEntryNotOfTheName(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try python(m, """
            import errno, os, sys
            os.chdir(sys.argv[1])
            backing = os.environ["B"]
            big = bytes(range(256)) * 3
            for name in ("a", "b"):
                open(name, "w").write(name)
                os.setxattr(name, "user.x", ("from-" + name).encode())
            os.setxattr("a", "user.big", big)
            fd = os.open("a", os.O_RDONLY)
            print(os.getxattr(fd, "user.x"), os.getxattr("a", "user.big") == big)
            os.rename(os.path.join(backing, "b"), os.path.join(backing, "a"))
            print(os.getxattr(fd, "user.x"), os.getxattr(fd, "user.big") == big)
            try:
                os.getxattr(fd, "user.none"); print("no error")
            except OSError as e:
                print(errno.errorcode[e.errno])
            os.close(fd)
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "b'from-a' True\nb'from-a' True\nENODATA\n", "\(r.out)")
        }
    }
}
