import Foundation
import Testing
import MAMTestSupport

/// The header hint through a mount: files written through it carry `user.mam.header` on the
/// backing file, clients never see or change it, stat answers from it, and a hint that lies
/// (the file rewritten by another program) never changes what a read returns and is rewritten
/// from the header by the first read.
@Suite("Header hint through the mount")
struct HeaderHintMountTests {
    /// Runs `body` (Python, with `errno`, `os`, `time` imported, cwd = mountpoint, `B` = the
    /// backing directory, `ACCT` = the managed account) and returns its output.
    private func python(_ m: MountedFixture, _ body: String) throws -> String {
        let script = m.base + "/hint.py"
        try Data(("""
        import errno, os, subprocess, sys, time
        os.chdir(sys.argv[1])
        B = os.environ["B"]
        ACCT = os.environ["ACCT"]
        def attempt(call, *args):
            try:
                call(*args)
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        def hint(path):
            try:
                return os.getxattr(path, "user.mam.header")
            except OSError as e:
                return errno.errorcode[e.errno]

        """ + body).utf8).write(to: URL(fileURLWithPath: script))
        let r = try m.sh("python3 \(shellQuote(script)) \"$M\"")
        #expect(r.status == 0, "\(r.err)")
        return r.out
    }

    @Test("a file written through the mount has the hint of its header on the backing file; through the mount it is not listed, not readable and not writable",
          arguments: MountedFixture.Kind.allCases)
    func writtenAndHidden(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            open("f", "w").write("hello world")
            expected = b"\\x01\\x01" + ACCT.encode() if \(m.isManaged ? "True" : "False") else b"\\x01\\x00"
            print(hint(B + "/f") == expected)
            print("user.mam.header" in os.listxattr("f"), attempt(os.getxattr, "f", "user.mam.header"),
                  attempt(os.setxattr, "f", "user.mam.header", b"\\x01\\x00"), attempt(os.removexattr, "f", "user.mam.header"))
            print(hint(B + "/f") == expected, os.stat("f").st_size, open("f").read())
            """)
            #expect(out == "True\nFalse ENODATA EPERM EPERM\nTrue 11 hello world\n", "\(out)")
        }
    }

    @Test("stat answers from the hint; a hint that lies changes no byte a read returns, and the first read rewrites it from the header and corrects the size")
    func lyingHint() throws {
        try withMount(.managed) { m in
            let out = try python(m, """
            open("f", "w").write("hello world")
            stored = os.stat(B + "/f").st_size
            # A hint claiming an unmanaged plain file (13-byte header): the size it implies
            # can only come from the hint.
            os.setxattr(B + "/f", "user.mam.header", b"\\x01\\x00")
            time.sleep(1.2)
            print(os.stat("f").st_size == stored - 13)
            print(open("f").read())
            print(os.stat("f").st_size, hint(B + "/f") == b"\\x01\\x01" + ACCT.encode())
            """)
            #expect(out == "True\nhello world\n11 True\n", "\(out)")
        }
    }

    @Test("a work file overwritten in place behind the mount with plain bytes (its hint left behind) reads as those bytes; the read removes the hint; a file without a hint shows its size")
    func staleAndMissingHint() throws {
        try withMount(.managed) { m in
            let out = try python(m, """
            open("f", "w").write("hello world")
            open("g", "w").write("second file")
            with open(B + "/f", "r+b") as x:
                x.truncate(0)
                x.write(b"plain text")
            os.removexattr(B + "/g", "user.mam.header")
            time.sleep(1.2)
            print(open("f").read(), os.stat("f").st_size, hint(B + "/f"))
            print(os.stat("g").st_size, open("g").read())
            """)
            #expect(out == "plain text 10 ENODATA\n11 second file\n", "\(out)")
        }
    }

    @Test("a hint left behind by an in-place rewrite, then a ctime change before the first open (chmod behind the mount, rename through it): a writable handle reads every byte and appends at the end, and the hint is removed")
    func staleHintThenCtimeChange() throws {
        try withMount(.managed) { m in
            let out = try python(m, """
            plain = b"A" * 2999 + b"END\\n"
            def read_all_then_append(path):
                fd = os.open(path, os.O_RDWR)
                data = b""
                while True:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    data += chunk
                os.write(fd, b"APPENDED\\n")
                os.close(fd)
                return data
            for name, change in (("doc", lambda: os.chmod(B + "/doc", 0o640)), ("doc2", lambda: os.rename("doc2", "doc3"))):
                open(name, "w").write("original\\n")
                with open(B + "/" + name, "r+b") as x:
                    x.truncate(0)
                    x.write(plain)
                time.sleep(1.2)
                shown = os.stat(name).st_size
                change()
                now = "doc3" if name == "doc2" else name
                data = read_all_then_append(now)
                print(shown != len(plain), data == plain, open(B + "/" + now, "rb").read() == plain + b"APPENDED\\n", hint(B + "/" + now))
            """)
            #expect(out == "True True True ENODATA\nTrue True True ENODATA\n", "\(out)")
        }
    }

    @Test("a hint naming a wiped owner does not hide a file whose header does not: an untagged file with a forged hint stays listed and readable after the wipe, and loses the hint")
    func forgedHintOfWipedOwner() throws {
        try withMount(.managed) { m in
            let out = try python(m, """
            open("work", "w").write("work data\\n")
            open(B + "/p", "w").write("personal\\n")
            os.setxattr(B + "/p", "user.mam.header", b"\\x01\\x01" + ACCT.encode())
            subprocess.run([os.environ["MAMFS"], "wipe", ACCT, "--state", os.environ["S"]], check=True, stdout=subprocess.DEVNULL)
            time.sleep(1.2)
            print(sorted(os.listdir(".")), open("p").read(), hint(B + "/p"), attempt(os.stat, "work"))
            """)
            #expect(out == "['p'] personal\n ENODATA ENOENT\n", "\(out)")
        }
    }
}
