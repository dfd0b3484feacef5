import Foundation
import Testing
@testable import MAMProtection

/// The crypto calls given nothing: an empty secret to unwrap and an empty passphrase to derive
/// from. Each hands OpenSSL a stand-in pointer (an empty buffer has none), which must stay
/// valid for the whole call.
@Suite("Crypto: empty secrets and passphrases")
struct EmptyInputCryptoTests {
    @Test("an empty secret seals and opens to zero bytes; a wrong AAD or a changed tag opens to nothing")
    func emptySecretRoundTrips() throws {
        let key = try SymmetricKey.random()
        let sealed = try AESGCM(key: key).seal([], aad: Array("aad".utf8))
        #expect(sealed.count == AESGCM.nonceSize + AESGCM.tagSize)
        let opened = try #require(try AESGCM(key: key).openSecret(sealed, aad: Array("aad".utf8)))
        #expect(opened.count == 0)
        #expect(try AESGCM(key: key).openSecret(sealed, aad: Array("other".utf8)) == nil)
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        #expect(try AESGCM(key: key).openSecret(tampered, aad: Array("aad".utf8)) == nil)
    }

    @Test("scrypt of an empty passphrase gives the RFC 7914 vector (empty salt) and Python's hashlib.scrypt (salt NaCl)")
    func emptyPassphraseDerives() throws {
        let rfc = try ScryptParameters(n: 16, r: 1, p: 1, salt: []).deriveKey(passphrase: [])
        #expect(Self.hex(rfc.copyBytes()) == "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442")
        let salted = try ScryptParameters(n: 16, r: 1, p: 1, salt: Array("NaCl".utf8)).deriveKey(passphrase: [])
        #expect(Self.hex(salted.copyBytes()) == "e9353f5e6fda27bfbd038b928f2b651b60593b74f3641f2bb287f0c0c714983c")
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
