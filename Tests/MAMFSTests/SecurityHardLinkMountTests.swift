import Foundation
import Glibc
import Testing

@Suite("Security: protecting a hard-linked file through the mount")
struct SecurityHardLinkMountTests {
    @Test("setfattr user.mam.owner (managed) on a file with a second hard link fails with EMLINK; both names stay plain with their bytes")
    func hardLinkedFileIsNotEncryptedThroughTheMount() throws {
        let m = try MountedFixture(.unmanaged)
        defer { m.close() }
        let r = try m.sh(#"""
        mkdir HL && printf 'LINKED-PLAINTEXT-MARKER\n' > HL/p1 && ln HL/p1 HL/p2
        setfattr -n user.mam.owner -v "$ACCT" HL/p1 2>&1; echo "status $?"
        cat "$B/HL/p1" "$B/HL/p2" | grep -c LINKED-PLAINTEXT-MARKER
        stat -c %h "$B/HL/p1"
        """#)
        #expect(r.out.contains("Too many links"), "\(r.out) \(r.err)")
        #expect(r.out.contains("status 1"), "\(r.out)")
        #expect(r.out.hasSuffix("2\n2\n"), "\(r.out)")
        #expect(try m.backingHeader("HL/p1")?.isEncrypted != true)
        let copy = try m.sh("cp HL/p1 HL/c && setfattr -n user.mam.owner -v \"$ACCT\" HL/c && cat HL/c")
        #expect(copy.status == 0 && copy.out == "LINKED-PLAINTEXT-MARKER\n", "\(copy.err)")
        #expect(try m.backingHeader("HL/c")?.isEncrypted == true)
    }
}
