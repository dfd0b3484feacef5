import Foundation
import Testing
import MAMProtection

@Suite("Mount basics")
struct BasicMountTests {
    @Test("Write and read back; backing owner, encryption and no plaintext", arguments: MountedFixture.Kind.allCases)
    func writeReadBack(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh(#"printf 'hello secret world\n' > f && cat f && stat -c %s f && mkdir d && echo x > d/y && ls d"#)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "hello secret world\n19\ny\n")
            let header = try m.backingHeader("f")
            #expect(header?.owner == m.expectedOwner)
            #expect(header?.isEncrypted == m.isManaged)
            let raw = try Data(contentsOf: URL(fileURLWithPath: m.backing + "/f"))
            #expect((String(data: raw, encoding: .isoLatin1) ?? "").contains("hello secret") == !m.isManaged)
        }
    }
}
