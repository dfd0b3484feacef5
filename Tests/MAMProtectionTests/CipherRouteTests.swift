import Foundation
import Testing
@testable import MAMProtection

/// AES-256-GCM is OpenSSL's, called through the default provider's functions where OpenSSL
/// offers them and through EVP otherwise. Both routes must give the published test vectors and
/// each other's bytes, and refuse what the other refuses.
@Suite("Crypto: the provider route and the EVP route")
struct CipherRouteTests {
    /// The GCM specification's test case 16 (AES-256, 96-bit IV, 20 bytes of AAD, 60 bytes).
    static let key = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"
    static let nonce = "cafebabefacedbaddecaf888"
    static let aad = "feedfacedeadbeeffeedfacedeadbeefabaddad2"
    static let plaintext = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
        + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
    static let ciphertext = "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
        + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
    static let tag = "76fc6ece0f4e1768cddf8853bb2d551b"

    @Test("OpenSSL's default provider is called directly on this machine")
    func providerIsCalledDirectly() {
        #expect(AESGCM.callsProviderDirectly)
    }

    @Test("each route seals test case 16 to its ciphertext and tag, and opens it back", arguments: [false, true])
    func publishedVector(throughEVP: Bool) throws {
        let cipher = try AESGCM(key: try SymmetricKey(bytes: Self.bytes(Self.key)), throughEVP: throughEVP)
        let (sealed, tag) = try Self.seal(cipher, nonce: Self.bytes(Self.nonce), aad: Self.bytes(Self.aad),
                                          plaintext: Self.bytes(Self.plaintext))
        #expect(Self.hex(sealed) == Self.ciphertext)
        #expect(Self.hex(tag) == Self.tag)
        let opened = try Self.open(cipher, nonce: Self.bytes(Self.nonce), aad: Self.bytes(Self.aad),
                                   ciphertext: sealed, tag: tag)
        #expect(opened.map(Self.hex) == Self.plaintext)
    }

    @Test("both routes agree on every length up to two 4 KiB blocks, and refuse a changed bit of text, AAD or tag")
    func routesAgree() throws {
        let key = try SymmetricKey.random()
        let direct = try AESGCM(key: key, throughEVP: false)
        let evp = try AESGCM(key: key, throughEVP: true)
        for length in [0, 1, 15, 16, 17, 255, 4_095, 4_096, 4_097, 8_192] {
            let nonce = try PublicRandom.bytes(AESGCM.nonceSize)
            let aad = try PublicRandom.bytes(length % 3 == 0 ? 0 : 24)
            let plaintext = try PublicRandom.bytes(length)
            let (a, tagA) = try Self.seal(direct, nonce: nonce, aad: aad, plaintext: plaintext)
            let (b, tagB) = try Self.seal(evp, nonce: nonce, aad: aad, plaintext: plaintext)
            #expect(a == b && tagA == tagB, "length \(length)")
            #expect(try Self.open(direct, nonce: nonce, aad: aad, ciphertext: b, tag: tagB) == plaintext)
            #expect(try Self.open(evp, nonce: nonce, aad: aad, ciphertext: a, tag: tagA) == plaintext)
            var badTag = tagA
            badTag[length % AESGCM.tagSize] ^= 0x80
            for cipher in [direct, evp] {
                #expect(try Self.open(cipher, nonce: nonce, aad: aad, ciphertext: a, tag: badTag) == nil)
                #expect(try Self.open(cipher, nonce: nonce, aad: aad + [1], ciphertext: a, tag: tagA) == nil)
                if length > 0 {
                    var badText = a
                    badText[length / 2] ^= 1
                    #expect(try Self.open(cipher, nonce: nonce, aad: aad, ciphertext: badText, tag: tagA) == nil)
                }
                // A refused message leaves the context fit for the next one.
                #expect(try Self.open(cipher, nonce: nonce, aad: aad, ciphertext: a, tag: tagA) == plaintext)
            }
        }
    }

    @Test("a refused message leaves zeros where its plaintext would have been, on both routes", arguments: [false, true])
    func refusedOutputIsWiped(throughEVP: Bool) throws {
        let cipher = try AESGCM(key: try SymmetricKey.random(), throughEVP: throughEVP)
        let nonce = try PublicRandom.bytes(AESGCM.nonceSize)
        let (sealed, tag) = try Self.seal(cipher, nonce: nonce, aad: [], plaintext: [UInt8](repeating: 0x5a, count: 4_096))
        var badTag = tag
        badTag[0] ^= 1
        var output = [UInt8](repeating: 0xaa, count: sealed.count)
        let ok = try nonce.withUnsafeBytes { n in
            try sealed.withUnsafeBytes { c in
                try badTag.withUnsafeBytes { t in
                    try output.withUnsafeMutableBytes { o in
                        try cipher.open(nonce: n, aad: UnsafeRawBufferPointer(start: nil, count: 0), ciphertext: c, tag: t,
                                        plaintext: o.baseAddress!)
                    }
                }
            }
        }
        #expect(!ok)
        #expect(output.allSatisfy { $0 == 0 }, "unverified plaintext left: \(output.filter { $0 != 0 }.count) bytes")
    }

    static func seal(_ cipher: AESGCM, nonce: [UInt8], aad: [UInt8], plaintext: [UInt8]) throws -> ([UInt8], [UInt8]) {
        var sealed = [UInt8](repeating: 0, count: max(plaintext.count, 1))
        var tag = [UInt8](repeating: 0, count: AESGCM.tagSize)
        try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                try plaintext.withUnsafeBytes { p in
                    try sealed.withUnsafeMutableBytes { s in
                        try tag.withUnsafeMutableBytes { t in
                            try cipher.seal(nonce: n, aad: a, plaintext: p, ciphertext: s.baseAddress!, tag: t.baseAddress!)
                        }
                    }
                }
            }
        }
        return (Array(sealed.prefix(plaintext.count)), tag)
    }

    /// The plaintext, or nil when the tag does not verify.
    static func open(_ cipher: AESGCM, nonce: [UInt8], aad: [UInt8], ciphertext: [UInt8], tag: [UInt8]) throws -> [UInt8]? {
        var opened = [UInt8](repeating: 0, count: max(ciphertext.count, 1))
        let ok = try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                try ciphertext.withUnsafeBytes { c in
                    try tag.withUnsafeBytes { t in
                        try opened.withUnsafeMutableBytes { o in
                            try cipher.open(nonce: n, aad: a, ciphertext: c, tag: t, plaintext: o.baseAddress!)
                        }
                    }
                }
            }
        }
        return ok ? Array(opened.prefix(ciphertext.count)) : nil
    }

    static func bytes(_ hex: String) -> [UInt8] { FormatFixture.bytes(hex: hex)! }

    static func hex(_ bytes: [UInt8]) -> String { FormatFixture.hex(bytes) }
}
