import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMTestSupport

/// `ProtectedFileContent.Shape`: the header's layout facts kept as plain values must say what
/// the header says, for every kind of file and after the header gets the sparse flag.
@Suite("ProtectedFileContent.Shape: the header's layout as plain values")
struct ContentShapeTests {
    private let owner = "8c7f3e1a-0000-4000-8000-000000000001"

    private func expectMatches(_ shape: ProtectedFileContent.Shape, _ header: ProtectedFileHeader?) throws {
        #expect(shape.headerLength == header.map { Int64($0.length) })
        #expect(shape.dataOffset == Int64(header?.length ?? 0))
        #expect(shape.isTagged == (header != nil))
        #expect(shape.isEncrypted == (header?.isEncrypted ?? false))
        #expect(shape.isSparse == (header?.isSparse ?? false))
        #expect(shape.maximumPlaintextSize == ProtectedFileContent.maximumPlaintextSize(header: header))
    }

    @Test("untagged, plain, encrypted: the shape and the static size functions agree with the header")
    func shapesOfEveryKind() throws {
        let accountKey = try SymmetricKey.random()
        let (encrypted, _) = try ProtectedFileHeader.makeEncrypted(owner: owner, keyId: 1, accountKey: accountKey)
        let headers: [ProtectedFileHeader?] = [nil, try ProtectedFileHeader(plainOwner: owner),
                                               try ProtectedFileHeader(plainOwner: "ü" + owner), encrypted]
        for header in headers {
            let shape = ProtectedFileContent.Shape(header)
            try expectMatches(shape, header)
            for plain: Int64 in [0, 1, 4095, 4096, 4097, 1 << 20, 123_457] {
                let stored = try #require(ProtectedFileContent.checkedStoredSize(plaintextSize: plain, header: header))
                #expect(ProtectedFileContent.checkedStoredSize(plaintextSize: plain, headerLength: shape.headerLength,
                                                               isEncrypted: shape.isEncrypted) == stored)
                #expect(try ProtectedFileContent.plaintextSize(storedSize: stored, headerLength: shape.headerLength,
                                                               isEncrypted: shape.isEncrypted) == plain)
            }
        }
        // The length counts the owner's UTF-8 bytes (a non-ASCII owner is longer than its characters).
        let wide = try ProtectedFileHeader(plainOwner: "ü" + owner)
        #expect(wide.length == wide.encoded().count)
        #expect(encrypted.length == encrypted.encoded().count)
    }

    @Test("a content's shape follows its header when the first hole sets the sparse flag")
    func shapeFollowsTheSparseFlag() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("s"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatHoleTests.sparseCapable(file, accountKey: key)
        try FormatFixture.write(content, Array("data".utf8), at: 0)
        #expect(content.shape.isSparse == false)
        try expectMatches(content.shape, content.header)
        try content.truncate(to: 1 << 20)
        #expect(content.header?.isSparse == true)
        #expect(content.shape.isSparse == true)
        try expectMatches(content.shape, content.header)
        #expect(try content.plaintextSize() == 1 << 20)
    }

    @Test("SecureWipe zeroes exactly the bytes it is given; nil and 0 bytes are no-ops")
    func secureWipeZeroesTheRange() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096 + 32, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
        SecureWipe.bytes(buffer.baseAddress! + 16, count: 4096)
        #expect(buffer[0..<16].allSatisfy { $0 == 0xA5 })
        #expect(buffer[16..<(16 + 4096)].allSatisfy { $0 == 0 })
        #expect(buffer[(16 + 4096)...].allSatisfy { $0 == 0xA5 })
        SecureWipe.bytes(buffer.baseAddress!, count: 0)
        SecureWipe.bytes(nil, count: 8)
        #expect(buffer[0] == 0xA5)
    }
}
