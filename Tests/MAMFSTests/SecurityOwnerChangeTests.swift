import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// Owner changes through an `allow_other` mount run by root are checked with the credentials of
/// the calling process, on every file they touch: a user cannot decrypt, or tag as managed, a
/// file it could not write by changing the owner of a directory it owns.
@Suite("Security: owner changes use the caller's credentials")
struct SecurityOwnerChangeTests {
    static let marker = "ROOT-ONLY-SECRET-7f3a9c"

    /// Sets `user.mam.owner` of `path` (relative to the mountpoint) to `owner` as user nobody
    /// (with the supplementary `groups`, none by default); prints "ok" or the errno name.
    static func setOwnerAsNobody(_ path: String, _ owner: String, groups: String? = nil) -> String {
        let groupOption = groups.map { "--groups=" + $0 } ?? "--clear-groups"
        return """
        setpriv --reuid=65534 --regid=65534 \(groupOption) /usr/bin/python3 -c '
        import errno, os, sys
        try:
            os.setxattr(sys.argv[1], "user.mam.owner", sys.argv[2].encode())
            print("ok")
        except OSError as e:
            print(errno.errorcode[e.errno])
        ' \(shellQuote(path)) \(shellQuote(owner))
        """
    }

    /// The stored bytes of a backing file.
    static func backingBytes(_ m: MountedFixture, _ relative: String) -> Data {
        FileManager.default.contents(atPath: m.backing + "/" + relative) ?? Data()
    }

    @Test("nobody's owner '' on its own directory does not decrypt root's 0600 file below it")
    func directoryOwnerChangeKeepsRootFileEncrypted() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            let r = try m.sh("""
            chmod 755 "$BASE" && mkdir d && printf '\(SecurityOwnerChangeTests.marker)' > d/secret && chmod 600 d/secret && \
            chown nobody:nogroup d && \(SecurityOwnerChangeTests.setOwnerAsNobody("d", ""))
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "EACCES\n", "nobody's setxattr on its directory: \(r.out) \(r.err)")
            let header = try m.backingHeader("d/secret")
            #expect(header?.owner == MountedFixture.account)
            #expect(header?.isEncrypted == true)
            let stored = SecurityOwnerChangeTests.backingBytes(m, "d/secret")
            #expect(!stored.isEmpty)
            #expect(stored.range(of: Data(SecurityOwnerChangeTests.marker.utf8)) == nil, "plaintext of root's file on the backing disk")
            let read = try m.sh("cat d/secret")
            #expect(read.out == SecurityOwnerChangeTests.marker, "\(read.err)")
        }
    }

    @Test("nobody cannot tag root's personal 0644 file as managed, directly or through its directory")
    func managedTagOnRootsPersonalFileIsRefused() throws {
        try withMount(.unmanaged, options: ["allow_other"]) { m in
            let r = try m.sh("""
            chmod 755 "$BASE" && echo personal > f && chmod 644 f && mkdir d && echo personal > d/g && chmod 644 d/g && \
            chown nobody:nogroup d && \(SecurityOwnerChangeTests.setOwnerAsNobody("f", MountedFixture.account)) && \
            \(SecurityOwnerChangeTests.setOwnerAsNobody("d", MountedFixture.account))
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "EACCES\nEACCES\n", "nobody's setxattr on f, then on d: \(r.out) \(r.err)")
            for file in ["f", "d/g"] {
                let header = try m.backingHeader(file)
                #expect(header?.owner == "", "\(file) owner \(String(describing: header?.owner))")
                #expect(header?.isEncrypted == false)
            }
        }
    }

    @Test("a supplementary group's write bit counts: nobody in group users may, without it may not")
    func supplementaryGroupsAreTheCallers() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            let r = try m.sh("""
            chmod 755 "$BASE" && mkdir d && printf '\(SecurityOwnerChangeTests.marker)' > d/shared && chown root:users d/shared && \
            chmod 660 d/shared && chown nobody:nogroup d && \(SecurityOwnerChangeTests.setOwnerAsNobody("d", "")) && \
            \(SecurityOwnerChangeTests.setOwnerAsNobody("d", "", groups: "users"))
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "EACCES\nok\n", "without, then with group users: \(r.out) \(r.err)")
            let header = try m.backingHeader("d/shared")
            #expect(header?.owner == "" && header?.isEncrypted == false, "\(String(describing: header?.owner))")
        }
    }

    @Test("nobody changes the owner of its own directory and files; root changes files nobody cannot write")
    func ownersWithWriteAccessMayChange() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            let r = try m.sh("""
            chmod 755 "$BASE" && mkdir d e && echo mine > d/mine && chown nobody:nogroup d d/mine && \
            \(SecurityOwnerChangeTests.setOwnerAsNobody("d", "")) && \
            printf '\(SecurityOwnerChangeTests.marker)' > e/secret && chmod 600 e/secret && chown nobody:nogroup e && \
            setfattr -n user.mam.owner -v '' e && echo root-ok
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "ok\nroot-ok\n", "\(r.out) \(r.err)")
            let mine = try m.backingHeader("d/mine")
            #expect(mine?.owner == "" && mine?.isEncrypted == false, "nobody's own file: \(String(describing: mine?.owner))")
            let secret = try m.backingHeader("e/secret")
            #expect(secret?.owner == "" && secret?.isEncrypted == false, "root's change: \(String(describing: secret?.owner))")
            let read = try m.sh("cat d/mine e/secret")
            #expect(read.out == "mine\n" + SecurityOwnerChangeTests.marker, "\(read.err)")
        }
    }
}
