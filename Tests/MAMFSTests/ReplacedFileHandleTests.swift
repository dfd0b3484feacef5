import Foundation
import Testing
import MAMTestSupport

/// Handles open on a file that another file replaced under its name. One kernel node has one
/// page cache, so two files must never share a node: the new file's managed bytes would reach
/// reads and shared maps of a handle on the old one (a personal hard link, say), and the old
/// handle's writes would show, and be written back, as the new file's. After an owner change
/// through the mount (the same plaintext, the old file unnamed) every handle follows the name;
/// otherwise the old handles keep the old file and the name gets a node (nodeid) of its own.
@Suite("Handles on a file that protect replaced")
struct ReplacedFileHandleTests {
    /// Runs `body` (Python, cwd = mountpoint; `B` = backing directory, `ACCT`, `PAGE` = 4096;
    /// `mapped(fd)` = a shared read-write map of the first two pages).
    private func python(_ m: MountedFixture, _ body: String) throws -> String {
        let script = m.base + "/replaced.py"
        try Data(("""
        import errno, mmap, os, sys
        os.chdir(sys.argv[1])
        B = os.environ["B"]
        ACCT = os.environ["ACCT"].encode()
        PAGE = 4096
        def mapped(fd):
            return mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        def owner_of(name):
            try:
                return os.getxattr(name, "user.mam.owner").decode() or "(unmanaged)"
            except OSError as e:
                return errno.errorcode[e.errno]
        def backing(name):
            return open(B + "/" + name, "rb").read()

        """ + body).utf8).write(to: URL(fileURLWithPath: script))
        let r = try m.sh("python3 \(shellQuote(script)) \"$M\"")
        #expect(r.status == 0, "\(r.err)")
        return r.out
    }

    @Test("protect through the mount of an open untagged file with no other name: every handle follows the name to the protected file, one content for all, none of it plain on the backing disk",
          arguments: MountedFixture.Kind.allCases)
    func handlesFollowAnOwnerChange(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            open(B + "/f", "wb").write(b"A" * 2 * PAGE)
            old = os.open("f", os.O_RDWR)
            old_map = mapped(old)
            print(old_map[:4], os.pread(old, 4, 0))
            os.setxattr("f", "user.mam.owner", ACCT)
            print(owner_of("f") == ACCT.decode())
            new = os.open("f", os.O_RDWR)
            new_map = mapped(new)
            new_map[:PAGE] = b"S" * PAGE
            new_map.flush()
            os.pwrite(new, b"T" * PAGE, PAGE)
            print(old_map[:4], old_map[PAGE:PAGE + 4], os.pread(old, 4, 0), os.pread(old, 4, PAGE))
            # What the old handle writes, by its map or by pwrite, goes to the protected file.
            old_map[8:12] = b"ZZZZ"
            old_map.flush()
            os.pwrite(old, b"YYYY", PAGE + 8)
            print(new_map[8:12], os.pread(new, 4, PAGE + 8), os.fstat(old).st_nlink)
            for x in (old_map, new_map): x.close()
            os.close(old); os.close(new)
            want = b"S" * 8 + b"ZZZZ" + b"S" * (PAGE - 12) + b"T" * 8 + b"YYYY" + b"T" * (PAGE - 12)
            print(open("f", "rb").read() == want, owner_of("f") == ACCT.decode())
            raw = backing("f")
            print(raw.startswith(b"\\x89MAMFS\\r\\n"), [w for w in (b"SSSS", b"TTTT", b"ZZZZ", b"YYYY") if w in raw])
            """)
            #expect(out == """
            b'AAAA' b'AAAA'
            True
            b'SSSS' b'TTTT' b'SSSS' b'TTTT'
            b'ZZZZ' b'YYYY' 1
            True True
            True []

            """, "\(out)")
        }
    }

    @Test("A file replaced under its name outside the mount (mamfs protect on the backing path) while a handle is open: the old handle keeps the old file's bytes, the name leads to the new file, and neither sees the other's writes",
          arguments: MountedFixture.Kind.allCases)
    func externalReplacementKeepsNodesApart(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            import subprocess
            open(B + "/e", "wb").write(b"A" * 2 * PAGE)
            old = os.open("e", os.O_RDWR)
            old_map = mapped(old)
            print(old_map[:4].decode(), os.fstat(old).st_ino == os.stat("e").st_ino)
            r = subprocess.run([os.environ["MAMFS"], "protect", B + "/e", "--account", ACCT.decode(), "--state", os.environ["S"]],
                               capture_output=True, text=True)
            print(r.returncode if r.returncode else "protected")
            # Reading the owner, like an open, makes the daemon pick the change up at once.
            print(owner_of("e") == ACCT.decode())
            new = os.open("e", os.O_RDWR)
            new_map = mapped(new)
            print(owner_of("e") == ACCT.decode(), os.fstat(new).st_ino != os.fstat(old).st_ino)
            new_map[:PAGE] = b"S" * PAGE
            new_map.flush()
            os.pwrite(new, b"T" * PAGE, PAGE)
            print(old_map[:4].decode(), os.pread(old, 4, PAGE).decode())
            old_map[8:12] = b"ZZZZ"
            old_map.flush()
            os.pwrite(old, b"YYYY", PAGE + 8)
            print(new_map[8:12].decode(), os.pread(new, 4, PAGE + 8).decode())
            for x in (old_map, new_map): x.close()
            os.close(old); os.close(new)
            print(open("e", "rb").read() == b"S" * PAGE + b"T" * PAGE, b"SSSS" in backing("e"))
            """)
            #expect(out == """
            AAAA True
            protected
            True
            True True
            AAAA AAAA
            SSSS TTTT
            True False

            """, "\(out)")
        }
    }

    @Test("A file with a second hard link, given a new file under one name by protect: the other name's untagged file gets none of the bytes written through the new one",
          arguments: MountedFixture.Kind.allCases)
    func hardLinkKeepsItsBytes(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            open(B + "/h", "wb").write(b"A" * 2 * PAGE)
            os.link(B + "/h", B + "/h2")
            old = os.open("h", os.O_RDWR)
            old_map = mapped(old)
            print(old_map[:4].decode())
            # Personal (owner ""): allowed with a second link; the name gets a tagged copy.
            os.setxattr("h", "user.mam.owner", b"")
            print(owner_of("h"), owner_of("h2"))
            new = os.open("h", os.O_RDWR)
            new_map = mapped(new)
            new_map[:PAGE] = b"S" * PAGE
            new_map.flush()
            os.pwrite(new, b"T" * PAGE, PAGE)
            print(old_map[:4].decode(), os.pread(old, 4, PAGE).decode())
            for x in (old_map, new_map): x.close()
            os.close(old); os.close(new)
            print(backing("h2") == b"A" * 2 * PAGE, open("h2", "rb").read() == b"A" * 2 * PAGE)
            print(open("h", "rb").read() == b"S" * PAGE + b"T" * PAGE, os.stat(B + "/h2").st_nlink)
            """)
            #expect(out == """
            AAAA
            (unmanaged) ENODATA
            AAAA AAAA
            True True
            True 1

            """, "\(out)")
        }
    }

    @Test("Files unlinked through the mount while open, whose names new files took, are not taken for replaced by a directory's owner change: their handles keep their bytes, the names get the new owner and keep what is written to them",
          arguments: MountedFixture.Kind.allCases)
    func unlinkedFilesAreNotReplacements(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            # Untagged files, placed in the backing directory: protect rewrites them on either kind.
            os.mkdir(B + "/d")
            old = {}
            for i in range(8):
                name = "d/a%d" % i
                open(B + "/" + name, "w").write("OLD-%d" % i)
                old[i] = os.open(name, os.O_RDWR)
                os.unlink(name)
                open(B + "/" + name, "w").write("NEW-%d" % i)
            os.setxattr("d", "user.mam.owner", ACCT)
            wrong = []
            for i in range(8):
                name = "d/a%d" % i
                if os.pread(old[i], 16, 0) != b"OLD-%d" % i: wrong.append(("old handle", i))
                os.pwrite(old[i], b"X", 0)
                if owner_of(name) != ACCT.decode(): wrong.append(("owner", i, owner_of(name)))
                with open(name, "r+") as f: f.write("WORK-%d" % i)
                os.close(old[i])
                if open(name).read() != "WORK-%d" % i: wrong.append(("content", i, open(name).read()))
            print(wrong)
            """)
            #expect(out == "[]\n", "\(out)")
        }
    }

    @Test("Files unlinked through the mount, still reachable by an O_PATH descriptor, whose names new files took: mamfs protect on the backing paths gives those names the new files, not the unlinked ones",
          arguments: MountedFixture.Kind.allCases)
    func unlinkedFilesStayApartAfterOutsideProtect(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            import subprocess
            held = {}
            for i in range(8):
                name = "p%d" % i
                open(B + "/" + name, "w").write("OLD-%d" % i)
                held[i] = os.open(name, os.O_PATH)
                os.unlink(name)
                open(B + "/" + name, "w").write("NEW-%d" % i)
            paths = [B + "/p%d" % i for i in range(8)]
            r = subprocess.run([os.environ["MAMFS"], "protect"] + paths + ["--account", ACCT.decode(), "--state", os.environ["S"]],
                               capture_output=True, text=True)
            print(r.returncode if r.returncode else "protected", r.stderr.strip()[:200])
            wrong = []
            for i in range(8):
                name = "p%d" % i
                # An open picks the change up (refresh); the unlinked file stays what its descriptor reads.
                if open(name).read() != "NEW-%d" % i: wrong.append(("content", i))
                if open("/proc/self/fd/%d" % held[i]).read() != "OLD-%d" % i: wrong.append(("unlinked file", i))
                if owner_of(name) != ACCT.decode(): wrong.append(("owner", i, owner_of(name)))
                with open(name, "r+") as f: f.write("WORK-%d" % i)
                os.close(held[i])
                if open(name).read() != "WORK-%d" % i: wrong.append(("write", i))
            print(wrong)
            """)
            #expect(out == "protected \n[]\n", "\(out)")
        }
    }

    @Test("An owner change by a hard link's name, after the name the file was first known by was removed or taken by another file, changes that file and no other; a handle on it follows it through a directory's owner change",
          arguments: MountedFixture.Kind.allCases)
    func ownerChangeByASurvivingLink(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            def plain(name, text):
                open(B + "/" + name, "w").write(text)
            # Removed, then another file under the old name.
            plain("a", "FILE-OF-B"); os.stat("a"); os.link("a", "b"); os.unlink("a"); plain("a", "UNRELATED")
            os.setxattr("b", "user.mam.owner", ACCT)
            print(owner_of("b") == ACCT.decode(), open("b").read(), backing("a"), owner_of("a"))
            # Replaced by a rename through the mount.
            plain("c", "FILE-OF-D"); os.stat("c"); os.link("c", "d"); plain("e", "OTHER"); os.rename("e", "c")
            os.setxattr("d", "user.mam.owner", ACCT)
            print(owner_of("d") == ACCT.decode(), open("d").read(), backing("c"), owner_of("c"))
            # No other name at all: the surviving link is still protected.
            plain("f", "FILE-OF-G"); os.stat("f"); os.link("f", "g"); os.unlink("f")
            os.setxattr("g", "user.mam.owner", ACCT)
            print(owner_of("g") == ACCT.decode(), open("g").read())
            # A directory's owner change: the handle open on the surviving link follows it.
            os.mkdir(B + "/s"); plain("s/a", "FILE-OF-B"); os.stat("s/a"); os.link("s/a", "s/b"); os.unlink("s/a")
            fd = os.open("s/b", os.O_RDWR)
            os.setxattr("s", "user.mam.owner", ACCT)
            os.pwrite(fd, b"WRITTEN-AFTER", 0)
            os.close(fd)
            print(owner_of("s/b") == ACCT.decode(), open("s/b").read())
            print(sorted(n for n in os.listdir(B) if not n.startswith(".")))
            """)
            #expect(out == """
            True FILE-OF-B b'UNRELATED' ENODATA
            True FILE-OF-D b'OTHER' ENODATA
            True FILE-OF-G
            True WRITTEN-AFTER
            ['a', 'b', 'c', 'd', 'g', 's']

            """, "\(out)")
        }
    }

    @Test("A handle left on a file that mamfs protect replaced from outside the mount: fchmod, fchown, ftruncate, futimens and fstat act on its own file, not on the name's new one",
          arguments: MountedFixture.Kind.allCases)
    func metadataCallsOnALeftHandle(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            import subprocess
            open(B + "/q", "w").write("QQQQQQQQ")
            os.chmod(B + "/q", 0o644)
            fd = os.open("q", os.O_RDWR)
            subprocess.run([os.environ["MAMFS"], "protect", B + "/q", "--account", ACCT.decode(), "--state", os.environ["S"]], check=True)
            print(owner_of("q") == ACCT.decode())
            results = []
            for name, call in (("fchmod", lambda: os.fchmod(fd, 0o600)), ("fchown", lambda: os.fchown(fd, 0, 0)),
                               ("ftruncate", lambda: os.ftruncate(fd, 4)), ("futimens", lambda: os.utime(fd, (1000000000, 1000000000)))):
                try:
                    call(); results.append(name + " ok")
                except OSError as e:
                    results.append(name + " " + errno.errorcode[e.errno])
            print(" ".join(results))
            st = os.fstat(fd)
            print(oct(st.st_mode & 0o777), st.st_mtime == 1000000000, os.pread(fd, 16, 0))
            st = os.stat("q")
            print(oct(st.st_mode & 0o777), st.st_mtime != 1000000000, open("q").read())
            os.close(fd)
            """)
            #expect(out == """
            True
            fchmod ok fchown ok ftruncate ok futimens ok
            0o600 True b'QQQQ'
            0o644 True QQQQQQQQ

            """, "\(out)")
        }
    }

    @Test("mamfs protect on a backing path never moves a name's entry to a file found by another, stale name: the work file's name keeps the work file, and an unrelated personal file under an old hard-link name gets none of its bytes",
          arguments: MountedFixture.Kind.allCases)
    func staleNamesNeverChooseAFile(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            import subprocess
            os.mkdir(B + "/d"); os.mkdir(B + "/d2")
            open(B + "/d/a", "w").write("WORKDATA\\n")
            os.stat("d/a"); os.link("d/a", "d2/b")
            # The other name is replaced outside the mount (an editor's save by rename).
            os.unlink(B + "/d2/b"); open(B + "/d2/b", "w").write("UNRELATED-PERSONAL\\n")
            subprocess.run([os.environ["MAMFS"], "protect", B + "/d/a", "--account", ACCT.decode(), "--state", os.environ["S"]], check=True)
            print(open("d/a").read().strip(), owner_of("d/a") == ACCT.decode())
            with open("d/a", "a") as f: f.write("SECRET-WORK-TEXT\\n")
            print(open("d/a").read().split(), backing("d2/b"), owner_of("d2/b"))
            """)
            #expect(out == """
            WORKDATA True
            ['WORKDATA', 'SECRET-WORK-TEXT'] b'UNRELATED-PERSONAL\\n' ENODATA

            """, "\(out)")
        }
    }

    @Test("Owner changes by names mamfs cannot pass on as a path touch no other file: a name that is not UTF-8 fails with EILSEQ while a look-alike name stays as it was; a live name ending in \" (deleted)\" is protected itself")
    func oddNamesNeverReachAnotherFile() throws {
        try withMount(.unmanaged) { m in
            let out = try python(m, """
            odd, look = b"a\\xff", b"a\\xef\\xbf\\xbd"
            open(B.encode() + b"/" + odd, "w").write("ODD")
            open(B.encode() + b"/" + look, "w").write("LOOK")
            try:
                os.setxattr(odd, "user.mam.owner", ACCT); print("protected")
            except OSError as e:
                print(errno.errorcode[e.errno])
            print(open(B.encode() + b"/" + look, "rb").read(), open(B.encode() + b"/" + odd, "rb").read(), open(odd).read())
            open(B + "/x", "w").write("X")
            open(B + "/x (deleted)", "w").write("XD")
            os.setxattr("x (deleted)", "user.mam.owner", ACCT)
            print(owner_of("x (deleted)") == ACCT.decode(), owner_of("x"), backing("x"), open("x (deleted)").read())
            """)
            #expect(out == """
            EILSEQ
            b'LOOK' b'ODD' ODD
            True ENODATA b'X' XD

            """, "\(out)")
        }
    }
}
