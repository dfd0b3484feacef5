import Foundation
import MAMTestSupport
import Testing

/// `verify-protect` of a file whose header is well formed but whose body is not what it claims
/// (plaintext behind a copied header, a flipped byte): not "protected" (exit 0), but 65
/// naming the failure; a genuine encrypted file still passes.
@Suite("CLI: verify-protect authenticates the body, not the header alone")
struct VerifyProtectBodyTests {
    @Test("a copied header in front of 4,124 bytes of plaintext, and an encrypted file with one flipped body byte: 65; the genuine file: 0")
    func headerAloneIsNotProtection() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("report.txt", Data(repeating: UInt8(ascii: "r"), count: 10_000))
        let encrypt = try sandbox.run(["encrypt", file, "--account", Fixtures.account])
        #expect(encrypt.status == 0, "\(encrypt.err)")
        let stored = try sandbox.read(file)
        let genuine = try sandbox.run(["verify-protect", file, "--account", Fixtures.account])
        #expect(genuine.status == 0, "\(genuine.err)")

        // The header of the genuine file, then one stored block's length of plaintext.
        let headerLength = stored.count - 2 * 4124 - (10_000 - 8192 + 28)
        var forged = Data(stored.prefix(headerLength))
        forged.append(Data(repeating: UInt8(ascii: "S"), count: 4124))
        let fake = try sandbox.write("fake.txt", forged)
        let info = try sandbox.run(["info", fake])
        #expect(info.status == 0, "the forged file's header is well formed: \(info.err)")
        let verdict = try sandbox.run(["verify-protect", fake, "--account", Fixtures.account])
        #expect(verdict.status == 65, "\(verdict.status) \(verdict.out) \(verdict.err)")
        #expect(verdict.err.contains("does not authenticate"), "\(verdict.err)")
        #expect(verdict.stdout.isEmpty)

        var flipped = stored
        flipped[headerLength + 4124 + 100] ^= 0x01
        let damaged = try sandbox.write("damaged.txt", flipped)
        let second = try sandbox.run(["verify-protect", damaged])
        #expect(second.status == 65, "\(second.status) \(second.err)")
        #expect(second.err.contains("block 1 does not authenticate"), "\(second.err)")
    }
}
