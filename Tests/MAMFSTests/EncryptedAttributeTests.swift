import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// Writing `user.mam.encrypted` through the mount: "1" raises protection (a plain work file is
/// encrypted under its owner, an unowned file in a mount with a managed account is protected
/// for that account), so copies that set the attribute list in name order (rsync -aX) work;
/// lowering it ("0" on an encrypted file) and values other than "0"/"1" are refused.
@Suite("Writing user.mam.encrypted through the mount")
struct EncryptedAttributeTests {
    /// A python3 program setting `user.mam.encrypted` to `value` on each of `paths` (relative
    /// to the current directory), printing "ok" or the errno name for each on one line.
    static func setEncrypted(_ value: String, _ paths: [String]) -> String {
        """
        python3 -c '
        import errno, os, sys
        def attempt(path):
            try:
                os.setxattr(path, "user.mam.encrypted", sys.argv[1].encode()); return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        print(" ".join(attempt(p) for p in sys.argv[2:]))
        ' \(shellQuote(value)) \(paths.map(shellQuote).joined(separator: " "))
        """
    }

    /// True when the backing file `relative` holds any of three 32-byte windows of `plaintext`
    /// (its start, middle and end).
    static func holdsPlaintext(_ m: MountedFixture, _ relative: String, _ plaintext: Data) -> Bool {
        let stored = FileManager.default.contents(atPath: m.backing + "/" + relative) ?? Data()
        let starts = [0, plaintext.count / 2, max(plaintext.count - 32, 0)]
        return starts.contains { start in
            stored.range(of: plaintext.subdata(in: start..<min(start + 32, plaintext.count))) != nil
        }
    }

    /// Expects each backing file of `names` to be encrypted for the fixture's account and to
    /// hold none of the plaintext of `$BASE/src.bin` (a non-empty file).
    static func expectEncryptedCopies(_ m: MountedFixture, _ names: [String],
                                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let plaintext = FileManager.default.contents(atPath: m.base + "/src.bin") ?? Data()
        #expect(!plaintext.isEmpty, sourceLocation: sourceLocation)
        for name in names {
            let header = try m.backingHeader(name)
            #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name): \(String(describing: header))",
                    sourceLocation: sourceLocation)
            #expect(!holdsPlaintext(m, name, plaintext), "plaintext of \(name) on the backing disk", sourceLocation: sourceLocation)
        }
    }

    /// Writes `json` to a new file below the fixture's base and returns its path.
    static func policyFile(_ m: MountedFixture, _ json: String) throws -> String {
        let file = m.base + "/policy-\(UUID().uuidString.prefix(8)).json"
        try Data(json.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    @Test("rsync -aX and cp -a of a work file and a work directory into a personal directory of a managed mount: exit 0, same bytes, the copies encrypted for the work owner, no plaintext on the backing disk")
    func copiesIntoAPersonalDirectory() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            head -c 300000 /dev/urandom > "$BASE/src.bin" && mkdir work pers && setfattr -n user.mam.owner -v "$ACCT" work && \
            setfattr -n user.mam.owner -v '' pers && cp "$BASE/src.bin" work/w.bin || exit 99
            rsync -aX work/w.bin pers/rs.bin; echo "rsync $?"
            cp -a work/w.bin pers/cp.bin; echo "cp $?"
            rsync -aX work pers/; echo "rsync $?"
            cp -a work pers/cp-dir; echo "cp $?"
            for f in rs.bin cp.bin work/w.bin cp-dir/w.bin; do cmp "$BASE/src.bin" pers/$f && echo same; done
            getfattr -d pers/rs.bin pers/work pers/work/w.bin | grep '^user.mam'
            """)
            let account = MountedFixture.account
            #expect(r.out == """
            rsync 0
            cp 0
            rsync 0
            cp 0
            same
            same
            same
            same
            user.mam.encrypted="1"
            user.mam.owner="\(account)"
            user.mam.encrypted="0"
            user.mam.owner="\(account)"
            user.mam.encrypted="1"
            user.mam.owner="\(account)"

            """, "\(r.out) \(r.err)")
            let copies = ["pers/rs.bin", "pers/cp.bin", "pers/work/w.bin", "pers/cp-dir/w.bin"]
            let stored = try m.backingHeaders(under: "pers").map(\.0)
            #expect(Set(stored) == Set(copies), "backing files: \(stored)")
            try EncryptedAttributeTests.expectEncryptedCopies(m, copies)
        }
    }

    @Test("an unmanaged mount has no account to protect an unowned file for: user.mam.encrypted=1 on it is EPERM and changes nothing, so rsync -aX of a work file exits 23 naming that attribute, while its user.mam.owner still gives the copy the work owner; cp -a exits 0")
    func unmanagedMountRefusesEncryptingUnownedFiles() throws {
        try withMount(.unmanaged) { m in
            let r = try m.sh("""
            head -c 100000 /dev/urandom > "$BASE/src.bin" && cp "$BASE/src.bin" w.bin && setfattr -n user.mam.owner -v "$ACCT" w.bin && \
            echo personal > p && printf 'raw\\n' > "$B/untagged" || exit 99
            \(EncryptedAttributeTests.setEncrypted("1", ["p", "untagged"]))
            rsync -aX w.bin rs.bin 2>"$BASE/rsync.err"; echo "rsync $?"
            cp -a w.bin cp.bin; echo "cp $?"
            for f in rs cp; do cmp "$BASE/src.bin" $f.bin && echo same; done
            cat p untagged
            """)
            #expect(r.out == "EPERM EPERM\nrsync 23\ncp 0\nsame\nsame\npersonal\nraw\n", "\(r.out) \(r.err)")
            let rsyncErrors = (try? String(contentsOfFile: m.base + "/rsync.err", encoding: .utf8)) ?? ""
            #expect(rsyncErrors.contains("\"user.mam.encrypted\") failed: Operation not permitted"), "\(rsyncErrors)")
            for name in ["rs.bin", "cp.bin"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name): \(String(describing: header))")
            }
            #expect(try m.backingHeader("p").map { $0.owner.isEmpty && !$0.isEncrypted } == true)
            #expect(try m.backingHeader("untagged") == nil)
            #expect(FileManager.default.contents(atPath: m.backing + "/untagged") == Data("raw\n".utf8))
        }
    }

    @Test("user.mam.encrypted=1 on a personal or an untagged file of a managed mount protects it for the mount's account, encrypted")
    func unownedFileIsProtectedForTheMountAccount() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            mkdir pers && setfattr -n user.mam.owner -v '' pers && head -c 70000 /dev/urandom > "$BASE/src.bin" && \
            cp "$BASE/src.bin" pers/p && cp "$BASE/src.bin" "$B/untagged" || exit 99
            \(EncryptedAttributeTests.setEncrypted("1", ["pers/p", "untagged"]))
            for f in pers/p untagged; do cmp "$BASE/src.bin" $f && echo same; \
              getfattr --only-values -n user.mam.owner $f; echo " $(getfattr --only-values -n user.mam.encrypted $f)"; done
            """)
            #expect(r.out == "ok ok\nsame\n\(MountedFixture.account) 1\nsame\n\(MountedFixture.account) 1\n", "\(r.out) \(r.err)")
            try EncryptedAttributeTests.expectEncryptedCopies(m, ["pers/p", "untagged"])
        }
    }

    @Test("user.mam.encrypted=1 on a plain-tagged work file encrypts it under its owner, also when the owner's policy does not require it; writing the owner again keeps it encrypted")
    func plainWorkFileIsEncrypted() throws {
        try withMount(.managed) { m in
            let plain = try EncryptedAttributeTests.policyFile(m, EncryptionRequiredMountTests.plainPolicy)
            let r = try m.sh("""
            "$MAMFS" policy set "$ACCT" \(shellQuote(plain)) --state "$S" >/dev/null && sleep 0.3 && \
            head -c 70000 /dev/urandom > "$BASE/src.bin" && cp "$BASE/src.bin" f && cp "$BASE/src.bin" g && \
            getfattr --only-values -n user.mam.encrypted f && echo || exit 99
            \(EncryptedAttributeTests.setEncrypted("1", ["f"]))
            setfattr -n user.mam.owner -v "$ACCT" f && getfattr --only-values -n user.mam.encrypted f && echo
            "$MAMFS" policy set "$ACCT" "$BASE/policy.json" --state "$S" >/dev/null && sleep 0.3
            \(EncryptedAttributeTests.setEncrypted("1", ["g"]))
            for x in f g; do cmp "$BASE/src.bin" $x && echo same; done
            """)
            #expect(r.out == "0\nok\n1\nok\nsame\nsame\n", "\(r.out) \(r.err)")
            try EncryptedAttributeTests.expectEncryptedCopies(m, ["f", "g"])
        }
    }

    @Test("user.mam.encrypted: 0 on an encrypted file is EPERM and leaves the backing file as it was; on a directory 0 is a no-op and 1 EPERM; values other than 0 and 1 are EINVAL")
    func loweringAndOtherValuesAreRefused() throws {
        try withMount(.managed) { m in
            let setup = try m.sh("echo secret > e && mkdir d")
            #expect(setup.status == 0, "\(setup.err)")
            let before = FileManager.default.contents(atPath: m.backing + "/e")
            var st = stat()
            #expect(stat(m.backing + "/e", &st) == 0)
            let r = try m.sh("""
            \(EncryptedAttributeTests.setEncrypted("0", ["e", "d"]))
            \(EncryptedAttributeTests.setEncrypted("1", ["e", "d"]))
            \(EncryptedAttributeTests.setEncrypted("yes", ["e", "d"]))
            \(EncryptedAttributeTests.setEncrypted("", ["e"]))
            \(EncryptedAttributeTests.setEncrypted("10", ["e"]))
            cat e; getfattr --only-values -n user.mam.encrypted e d; echo
            """)
            #expect(r.out == "EPERM ok\nok EPERM\nEINVAL EINVAL\nEINVAL\nEINVAL\nsecret\n10\n", "\(r.out) \(r.err)")
            var after = stat()
            #expect(stat(m.backing + "/e", &after) == 0)
            #expect(after.st_ino == st.st_ino && FileManager.default.contents(atPath: m.backing + "/e") == before,
                    "the refused writes rewrote the backing file")
            #expect(try m.backingHeader("e").map { $0.owner == MountedFixture.account && $0.isEncrypted } == true)
        }
    }

    @Test("user.mam.encrypted needs write access (allow_other mount, caller nobody): EACCES on root's 0644 files, also for the current value; nobody's own personal file is protected")
    func writeAccessIsNeeded() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            let r = try m.sh("""
            chmod 755 "$BASE" && mkdir pers && setfattr -n user.mam.owner -v '' pers && echo root > pers/root && \
            chmod 644 pers/root && echo mine > pers/mine && chown nobody:nogroup pers/mine && echo work > work && chmod 644 work || exit 99
            setpriv --reuid=65534 --regid=65534 --clear-groups bash -c \(shellQuote(EncryptedAttributeTests.setEncrypted("1", ["pers/root", "work", "pers/mine"])))
            cat pers/root pers/mine
            """)
            #expect(r.out == "EACCES EACCES ok\nroot\nmine\n", "\(r.out) \(r.err)")
            #expect(try m.backingHeader("pers/root").map { $0.owner.isEmpty && !$0.isEncrypted } == true)
            #expect(try m.backingHeader("pers/mine").map { $0.owner == MountedFixture.account && $0.isEncrypted } == true)
        }
    }
}
