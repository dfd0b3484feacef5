import Foundation
import Testing
import MAMTestSupport

/// Bytes written through the mount never change a file's owner: a write that would make an
/// untagged file (one placed in the backing directory without a header) start with the magic,
/// and so be read as tagged for whatever owner the following bytes name, fails with EPERM and
/// changes nothing. Files the mount tagged take the same bytes as data.
@Suite("Untagged files do not become tagged by a write")
struct UntaggedMagicWriteTests {
    /// Runs `body` (Python, cwd = mountpoint, `B` = backing directory, `HDR` = a plain header
    /// naming the managed account, `MAGIC`, `attempt(f)` = "ok" or the errno name).
    private func python(_ m: MountedFixture, _ body: String) throws -> String {
        let script = m.base + "/magic.py"
        try Data(("""
        import errno, multiprocessing, os, sys, time
        os.chdir(sys.argv[1])
        B = os.environ["B"]
        owner = os.environ["ACCT"].encode()
        MAGIC = b"\\x89MAMFS\\r\\n"
        HDR = MAGIC + b"\\x01\\x00" + (13 + len(owner)).to_bytes(2, "little") + bytes([len(owner)]) + owner
        def attempt(call):
            try:
                call()
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        def pwrite(name, data, offset, flags=os.O_RDWR):
            def go():
                fd = os.open(name, flags)
                try:
                    if flags & os.O_APPEND:
                        os.write(fd, data)
                    else:
                        os.pwrite(fd, data, offset)
                finally:
                    os.close(fd)
            return attempt(go)
        def raw(name):
            return open(B + "/" + name, "rb").read()
        REST = HDR[len(MAGIC):]
        def detach(name):
            # A second name, a handle on the file, then protect (a new file under `name`): the
            # handle stays on the old file, which the second name reaches through an entry of
            # its own once the kernel looks it up again (entry timeout 1 s).
            os.link(name, name + "2")
            h = os.open(name, os.O_RDWR)
            os.setxattr(name, "user.mam.owner", b"")
            os.pwrite(h, b"x", 40)
            time.sleep(1.3)
            return h
        def owner_of(name):
            try:
                return os.getxattr(name, "user.mam.owner").decode()
            except OSError as e:
                return errno.errorcode[e.errno]

        """ + body).utf8).write(to: URL(fileURLWithPath: script))
        let r = try m.sh("python3 \(shellQuote(script)) \"$M\"")
        #expect(r.status == 0, "\(r.err)")
        return r.out
    }

    @Test("a plain header written at offset 0 of an untagged file, or the magic completed byte by byte or by an append, fails with EPERM; the file keeps its bytes and stays untagged",
          arguments: MountedFixture.Kind.allCases)
    func refused(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            text = b"plain text, long enough to hold a header\\n"
            open(B + "/u", "wb").write(text)
            open(B + "/short", "wb").write(MAGIC[:7])
            open(B + "/empty", "wb").close()
            print(pwrite("u", HDR, 0), pwrite("empty", HDR, 0), pwrite("short", b"\\n", 7),
                  pwrite("short", b"\\n" + owner, 0, os.O_WRONLY | os.O_APPEND))
            print(raw("u") == text, raw("empty") == b"", raw("short") == MAGIC[:7])
            print(open("u", "rb").read() == text, os.stat("u").st_size == len(text), owner_of("u"), owner_of("short"))
            # Writes that leave bytes 0..<8 other than the magic go through, and a later one
            # that would complete it is still refused.
            print(pwrite("u", MAGIC, 8), pwrite("u", MAGIC[:7], 0), pwrite("u", b"\\n", 7))
            print(raw("u") == MAGIC[:7] + text[7:8] + MAGIC + text[16:], owner_of("u"))
            """)
            #expect(out == """
            EPERM EPERM EPERM EPERM
            True True True
            True True ENODATA ENODATA
            ok ok EPERM
            True ENODATA

            """, "\(out)")
        }
    }

    @Test("a handle left on an untagged file by protect writes by the file's header after another name gave it one, and it and that name racing to complete the magic never tag it",
          arguments: MountedFixture.Kind.allCases)
    func handleLeftByProtect(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            open(B + "/u", "wb").write(b"personal notes, plain text, long enough\\n")
            open(B + "/v", "wb").write(b"more personal notes, long enough too\\n")
            h = detach("u")
            os.close(os.open("u2", os.O_RDWR | os.O_TRUNC))
            before = owner_of("u2")
            print(attempt(lambda: os.pwrite(h, REST + b"forged", 8)))
            os.close(h)
            time.sleep(1.3)
            print(owner_of("u2") == before, open("u2", "rb").read() == bytes(8) + REST + b"forged")

            h1 = detach("v")
            h2 = os.open("v2", os.O_RDWR)
            os.pwrite(h2, REST, 8)
            tagged = multiprocessing.Value("i", 0)
            def race(fd, bad, at, good):
                end = time.time() + 3
                while not tagged.value and time.time() < end:
                    attempt(lambda: os.pwrite(fd, bad, at))
                    if open(B + "/v2", "rb").read(8) == MAGIC:
                        tagged.value = 1
                    os.pwrite(fd, good, at)
            racers = [multiprocessing.Process(target=race, args=(h1, MAGIC[:7], 0, b"more pe")),
                      multiprocessing.Process(target=race, args=(h2, b"\\n", 7, b"r"))]
            [p.start() for p in racers]
            [p.join() for p in racers]
            os.close(h1)
            os.close(h2)
            time.sleep(1.3)
            print(tagged.value, owner_of("v2"))
            """)
            #expect(out == "ok\nTrue True\n0 ENODATA\n", "\(out)")
            #expect(try m.backingHeader("u2")?.owner == m.expectedOwner)
            #expect(try m.backingHeader("v2") == nil)
        }
    }

    @Test("a file the mount tagged takes a header's bytes as data at offset 0; its owner stays the mount's",
          arguments: MountedFixture.Kind.allCases)
    func taggedTakesTheBytes(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let out = try python(m, """
            open("t", "wb").write(b"x")
            before = owner_of("t")
            print(pwrite("t", HDR + b"body", 0), open("t", "rb").read() == HDR + b"body", owner_of("t") == before)
            print(raw("t")[:len(HDR)] != HDR)
            """)
            #expect(out == "ok True True\nTrue\n", "\(out)")
            if m.isManaged {
                #expect(try m.backingHeader("t")?.owner == MountedFixture.account)
                #expect(try m.backingHeader("t")?.isEncrypted == true)
            } else {
                #expect(try m.backingHeader("t")?.owner == "")
            }
        }
    }
}
