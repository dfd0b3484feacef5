import Foundation
import Testing
import MAMProtection
@testable import MAMFS

/// Owner tagging, the mamfs xattrs, errors for tampered data and missing keys, and changes made
/// by the CLI while mounted.
@Suite("Protection through the mount")
struct ProtectionTests {
    @Test("user.mam.owner and user.mam.encrypted read back; encrypted cannot be changed; listed only for an owned file", arguments: MountedFixture.Kind.allCases)
    func ownerAttributes(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            echo data > f && getfattr --only-values -n user.mam.owner f; echo "|" && \
            getfattr --only-values -n user.mam.encrypted f && echo && \
            (setfattr -n user.mam.encrypted -v \(m.isManaged ? 0 : 1) f 2>/dev/null && echo writable || echo read-only) && \
            getfattr -d -m - f | grep -c user.mam; \
            mkdir d && (getfattr -n user.mam.owner d >/dev/null 2>&1 && echo tagged || echo untagged-dir)
            """)
            #expect(r.out == "\(m.expectedOwner)|\n\(m.isManaged ? 1 : 0)\nread-only\n\(m.isManaged ? 2 : 0)\nuntagged-dir\n", "\(r.err)")
        }
    }

    @Test("Writing user.mam.owner protects a file, and a directory recursively with inheritance")
    func protectThroughXattr() throws {
        try withMount(.unmanaged) { m in
            let r = try m.sh("""
            mkdir -p work/sub && echo secret-one > work/one && echo secret-two > work/sub/two && echo mine > mine && \
            setfattr -n user.mam.owner -v "$ACCT" work && cat work/one work/sub/two && \
            getfattr --only-values -n user.mam.owner work/sub/two && echo && getfattr --only-values -n user.mam.owner work && echo && \
            echo new-secret > work/sub/three && cat work/sub/three && \
            setfattr -n user.mam.owner -v "$ACCT" mine && cat mine && getfattr --only-values -n user.mam.encrypted mine && echo && \
            setfattr -n user.mam.owner -v '' mine && cat mine && getfattr --only-values -n user.mam.encrypted mine && echo && \
            getfattr -n user.mam.owner "$B/work" 2>/dev/null | grep -c owner; getfattr -d "$M/work" | grep -c "^user.mam"
            """)
            #expect(r.status == 0 || r.out.hasSuffix("0\n"), "\(r.err)")
            #expect(r.out == "secret-one\nsecret-two\n\(MountedFixture.account)\n\(MountedFixture.account)\nnew-secret\nmine\n1\nmine\n0\n1\n2\n", "\(r.err)")
            for name in ["work/one", "work/sub/two", "work/sub/three"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name)")
            }
            #expect(try m.backingHeader("mine")?.isEncrypted == false)
        }
    }

    @Test("New files take the nearest tagged ancestor's owner, also when the tag was set on the backing directory")
    func nearestTaggedAncestorOwnsNewFiles() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            mkdir -p a/b/c && setfattr -n user.mam.owner -v '' a && echo x > a/b/c/deep && echo y > top && \
            setfattr -n user.mam.owner -v "$ACCT" "$B/a/b" && echo z > a/b/c/deeper && \
            printf 'plain\\n' > "$B/a/b/c/untagged" && echo t > a/b/c/untagged && \
            cat a/b/c/deep top a/b/c/deeper a/b/c/untagged
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "x\ny\nz\nt\n")
            #expect(try m.backingHeader("a/b/c/deep").map { $0.owner.isEmpty && !$0.isEncrypted } == true)
            for name in ["top", "a/b/c/deeper", "a/b/c/untagged"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name)")
            }
        }
    }

    @Test("A daemon run by a user that cannot read a directory's tag refuses new files below it (EACCES), never guessing a personal owner",
          .enabled(if: !MountedFixture.useInProcess && geteuid() == 0, "mounts as user nobody"))
    func unreadableTagRefusesNewFiles() throws {
        try withMount(.unmanaged) { m in
            // p is tagged personal; p/shut is tagged with the managed account and has no read
            // permission for its owner, the daemon's user, so its tag cannot be read; p/open
            // is readable and untagged. A file below p/shut must not get p's personal owner.
            let r = try m.shAsNobody("""
            D=$1; M=$2; A=$3
            mkdir -p "$D/b" "$D/m" && "$M" init --state "$D/st" >/dev/null && \
            printf '{"fileEncryptionRequired": true}' > "$D/p.json" && \
            "$M" enroll "$A" --upn walk@contoso.com --policy "$D/p.json" --state "$D/st" >/dev/null && \
            "$M" mount "$D/b" "$D/m" --state "$D/st" || exit 1
            cd "$D/m" || exit 1
            mkdir -p p/shut/below p/open && setfattr -n user.mam.owner -v '' p && setfattr -n user.mam.owner -v "$A" p/shut && \
            chmod 0311 p/shut || exit 1
            ( echo secret > p/shut/below/f ) 2>&1 | sed 's/.*: //'
            ( echo secret > p/shut/f ) 2>&1 | sed 's/.*: //'
            ( : > p/shut/below/g ) 2>&1 | sed 's/.*: //'
            ls -A p/shut/below && echo -
            echo mine > p/open/mine && getfattr --only-values -n user.mam.owner p/open/mine && echo "|"
            chmod 0711 p/shut && echo secret > p/shut/below/f && getfattr --only-values -n user.mam.owner p/shut/below/f && echo
            rc=$?
            cd / && fusermount3 -u "$D/m"
            exit $rc
            """, after: """
            python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); print("plaintext-on-disk" if b"secret" in d else "ciphertext-on-disk")' "$D/b/p/shut/below/f"
            ls "$D/b/p/shut"
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "Permission denied\nPermission denied\nPermission denied\n-\n|\n\(MountedFixture.account)\nciphertext-on-disk\nbelow\n",
                    "\(r.err)")
        }
    }

    @Test("Untagged backing files pass through unchanged until truncated")
    func untaggedPassThrough() throws {
        try withMount(.managed) { m in
            try Data("plain backing file\n".utf8).write(to: URL(fileURLWithPath: m.backing + "/untagged"))
            let r = try m.sh("cat untagged && stat -c %s untagged && cat untagged >/dev/null && echo again >> untagged && cat untagged")
            #expect(r.out == "plain backing file\n19\nplain backing file\nagain\n", "\(r.err)")
            #expect(try m.backingHeader("untagged") == nil)
            let t = try m.sh("echo replaced > untagged && cat untagged")
            #expect(t.out == "replaced\n")
            let header = try m.backingHeader("untagged")
            #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true)
        }
    }

    @Test("A tampered block answers EIO (and is logged), other blocks still read")
    func tamperedBlock() throws {
        try withMount(.managed) { m in
            let w = try m.sh("head -c 12288 /dev/urandom > f && sync")
            #expect(w.status == 0)
            let header = try #require(try m.backingHeader("f"))
            let offset = header.length + BlockLayout.storedBlockSize + 100
            let fd = open(m.backing + "/f", O_RDWR)
            var byte: UInt8 = 0
            pread(fd, &byte, 1, off_t(offset))
            byte ^= 0x01
            pwrite(fd, &byte, 1, off_t(offset))
            close(fd)
            let r = try m.sh("""
            echo 3 > /proc/sys/vm/drop_caches; dd if=f bs=4096 count=1 status=none | wc -c; \
            dd if=f bs=4096 skip=1 count=1 status=none 2>&1 >/dev/null | grep -c 'Input/output error'; \
            cat f > /dev/null 2>&1; echo "cat $?"
            """)
            #expect(r.out == "4096\n1\ncat 1\n", "\(r.err)")
            // The daemon logs the failure with the backing path (in-process mounts log to the
            // test's own stderr, which cannot be read back).
            if m.logsToFile {
                let log = (try? String(contentsOfFile: m.log, encoding: .utf8)) ?? ""
                let line = log.split(separator: "\n").first { $0.contains(m.backing + "/f:") }
                #expect(line != nil, "log: \(log)")
                #expect(line?.hasPrefix("mamfs: ") == true)
            }
        }
    }

    @Test("A file whose key is unavailable (unknown owner) answers EACCES")
    func unavailableKey() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            S2="$BASE/state2"; echo '{"fileEncryptionRequired": true}' > "$BASE/p2.json" && \
            "$MAMFS" init --state "$S2" && "$MAMFS" enroll "$OTHER" --policy "$BASE/p2.json" --state "$S2" && \
            echo foreign > "$BASE/foreign" && "$MAMFS" encrypt "$BASE/foreign" --account "$OTHER" --state "$S2" && \
            cp "$BASE/foreign" "$B/foreign" && ls && (cat foreign 2>&1 || true)
            """)
            #expect(r.out.contains("foreign\n"), "\(r.err)")
            #expect(r.out.contains("Permission denied"), "\(r.out) \(r.err)")
        }
    }

    @Test("Selective wipe while mounted: the account's files disappear, personal files stay")
    func wipeWhileMounted() throws {
        try withMount(.managed) { m in
            try Data("personal\n".utf8).write(to: URL(fileURLWithPath: m.backing + "/personal"))
            let r = try m.sh("""
            echo corporate > corp && mkdir dir && echo more > dir/x && ls && \
            "$MAMFS" wipe "$ACCT" --state "$S" >/dev/null && sleep 1.2 && echo after && ls -R && cat personal && \
            (cat corp 2>&1 || true)
            """)
            #expect(r.status == 0, "\(r.err)")
            let after = r.out.components(separatedBy: "after\n").last ?? ""
            #expect(!after.contains("corp\n") && !after.contains("x\n"), "\(r.out)")
            #expect(after.contains("personal\n"))
            #expect(after.contains("No such file") || after.contains("Permission denied"))
        }
    }

    @Test("A policy change while mounted applies to new files without remounting")
    func policyChangeWhileMounted() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            echo before > a && echo '{"fileEncryptionRequired": false}' > "$BASE/plain.json" && \
            "$MAMFS" policy set "$ACCT" "$BASE/plain.json" --state "$S" >/dev/null && echo after > b && cat a b
            """)
            #expect(r.out == "before\nafter\n", "\(r.err)")
            #expect(try m.backingHeader("a")?.isEncrypted == true)
            let b = try m.backingHeader("b")
            #expect(b?.owner == MountedFixture.account && b?.isEncrypted == false)
        }
    }

    @Test("protect on a backing path by the CLI takes effect in the mount")
    func protectOnBackingWhileMounted() throws {
        try withMount(.unmanaged) { m in
            let r = try m.sh("""
            echo plain-now > f && cat f && "$MAMFS" protect "$B/f" --account "$ACCT" --state "$S" && \
            cat f && getfattr --only-values -n user.mam.encrypted f && echo
            """)
            #expect(r.out == "plain-now\nplain-now\n1\n", "\(r.err)")
            #expect(try m.backingHeader("f")?.isEncrypted == true)
        }
    }

    @Test("mount refuses a missing or non-empty mountpoint, a missing backing directory, an unknown account")
    func mountValidation() throws {
        let base = NSTemporaryDirectory() + "mamfs-val-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: base) }
        for dir in ["b", "m", "full"] { try FileManager.default.createDirectory(atPath: base + "/" + dir, withIntermediateDirectories: true) }
        try Data("x".utf8).write(to: URL(fileURLWithPath: base + "/full/x"))
        let context = try ProtectionContext.initialize(stateDirectory: StateDirectory(path: base + "/state"), passphraseFile: nil)
        func attempt(_ backing: String, _ mountpoint: String, account: String = "") -> MAMError? {
            var options = MountOptions(backingDirectory: base + "/" + backing, mountpoint: base + "/" + mountpoint, account: account)
            do { _ = try MountDaemon.prepare(&options, context: context); return nil } catch { return error as? MAMError }
        }
        #expect(attempt("b", "missing").map { if case .fileNotFound = $0 { true } else { false } } == true)
        #expect(attempt("missing", "m").map { if case .fileNotFound = $0 { true } else { false } } == true)
        #expect(attempt("b", "full").map { if case .invalidArguments = $0 { true } else { false } } == true)
        #expect(attempt("b", "b/").map { if case .invalidArguments = $0 { true } else { false } } == true)
        #expect(attempt("b", "m", account: "nobody@contoso.com").map { if case .unknownAccount = $0 { true } else { false } } == true)
        #expect(attempt("b", "m") == nil)
    }
}
