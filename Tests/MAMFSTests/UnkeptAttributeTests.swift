import Foundation
import Testing
import MAMTestSupport

/// POSIX ACLs and security-module labels are not carried by a mount: get, set and remove answer
/// EOPNOTSUPP through it, list leaves them out, the backing object keeps what it had, and
/// `ls -l` remembers the answer for the whole mount instead of asking for every entry.
@Suite("ACLs and security labels through the mount")
struct UnkeptAttributeTests {
    private static let names = ["system.posix_acl_access", "system.posix_acl_default", "security.selinux", "security.SMACK64"]

    @Test("get, set and remove of an ACL or a security label answer EOPNOTSUPP on files and directories, list leaves the backing file's out, the backing objects keep what they had",
          arguments: MountedFixture.Kind.allCases)
    func unsupported(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let script = m.base + "/unkept.py"
            try Data("""
            import errno, os, struct, sys
            os.chdir(sys.argv[1])
            B = os.environ["B"]
            def attempt(call, *args):
                try:
                    call(*args)
                    return "ok"
                except OSError as e:
                    return "unsupported" if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno]
            entries = [(0x01, 6, 0xffffffff), (0x02, 4, 1234), (0x04, 4, 0xffffffff), (0x10, 4, 0xffffffff), (0x20, 4, 0xffffffff)]
            acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
            label = b"system_u:object_r:tmp_t:s0\\0"
            open("f", "w").write("data\\n")
            os.mkdir("d")
            os.setxattr(B + "/f", "system.posix_acl_access", acl)
            os.setxattr(B + "/f", "security.selinux", label)
            os.setxattr("f", "user.x", b"1")
            print(sorted(os.listxattr("f")), sorted(os.listxattr("d")))
            # A default ACL belongs to directories: for a file the kernel answers set and remove itself.
            for name in \(UnkeptAttributeTests.names):
                paths = ("d",) if name.endswith("default") else ("f", "d")
                print(name, *[attempt(call, path, *args) for path in paths
                              for call, args in ((os.getxattr, (name,)), (os.setxattr, (name, acl)), (os.removexattr, (name,)))])
            print(os.getxattr(B + "/f", "system.posix_acl_access") == acl, os.getxattr(B + "/f", "security.selinux") == label,
                  attempt(os.getxattr, B + "/d", "system.posix_acl_default"), attempt(os.getxattr, B + "/d", "security.selinux"),
                  os.getxattr("f", "user.x"), open("f").read(), end="")
            """.utf8).write(to: URL(fileURLWithPath: script))
            let r = try m.sh("python3 \(shellQuote(script)) \"$M\"")
            #expect(r.status == 0, "\(r.err)")
            let fileNames = m.isManaged ? "'user.mam.encrypted', 'user.mam.owner', 'user.x'" : "'user.x'"
            let refused = UnkeptAttributeTests.names.map {
                $0 + String(repeating: " unsupported", count: $0.hasSuffix("default") ? 3 : 6) + "\n"
            }.joined()
            #expect(r.out == "[\(fileNames)] []\n" + refused + "True True ENODATA ENODATA b'1' data\n", "\(r.out)")
        }
    }

    @Test("ls -lR asks the mount for an ACL and a security label once, not once per entry, and lists every entry")
    func lsAsksOnce() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            set -e
            mkdir -p t/a t/b
            for i in $(seq 1 20); do echo "$i" > "t/a/f$i"; echo "$i" > "t/b/g$i"; done
            strace -f -qq -e trace=getxattr,lgetxattr,fgetxattr,listxattr,llistxattr,flistxattr -o "$BASE/ls.trace" ls -lR t > "$BASE/ls.out"
            grep -c '^-' "$BASE/ls.out"
            grep -c 'xattr(' "$BASE/ls.trace" || true
            grep -c -v 'EOPNOTSUPP\\|ENOTSUP' "$BASE/ls.trace" || true
            """)
            #expect(r.status == 0, "\(r.err)")
            let counts = r.out.split(separator: "\n").compactMap { Int($0) }
            #expect(counts.count == 3, "\(r.out)")
            guard counts.count == 3 else { return }
            #expect(counts[0] == 40, "ls -lR lists all 40 files: \(r.out)")
            #expect(counts[1] >= 1 && counts[1] <= 3, "one ask of each kind for the mount, 2 per entry before: \(r.out)")
            #expect(counts[2] == 0, "every ask is answered EOPNOTSUPP: \(r.out)")
        }
    }
}
