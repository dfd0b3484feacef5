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
        import errno, os, sys
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
