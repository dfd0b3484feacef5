import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

@Suite("DataProtectionManager")
struct DataProtectionManagerTests {
    @Test("protect encrypts for a managed account and unprotect returns the bytes", arguments: [0, 1, 4096, 10_000])
    func managedRoundTrip(size: Int) throws {
        let f = try StateFixture()
        let data = Data(randomBytes(size))
        let protected = try f.context.data.protect(data, accountId: StateFixture.managedId)
        #expect(try f.context.data.protectionInfo(protected) == StateFixture.managedId)
        #expect(try ProtectedFileHeader.decode(protected.withUnsafeBytes { UnsafeRawBufferPointer($0) })?.isEncrypted == true)
        if size > 32 { #expect(protected.range(of: data.prefix(32)) == nil) }
        #expect(try f.context.data.unprotect(protected) == data)
    }

    @Test("an unmanaged identity gets a header but plain data")
    func unmanagedHeaderOnly() throws {
        let f = try StateFixture()
        let data = Data("hello".utf8)
        let protected = try f.context.data.protect(data, accountId: StateFixture.otherId)
        #expect(protected.suffix(5) == data)
        #expect(try f.context.data.protectionInfo(protected) == StateFixture.otherId)
        #expect(try f.context.data.unprotect(protected) == data)
    }

    @Test("unprotect of never-protected input returns it unchanged")
    func unprotectPassthrough() throws {
        let f = try StateFixture()
        let data = Data("just text, no header".utf8)
        #expect(try f.context.data.unprotect(data) == data)
        #expect(try f.context.data.protectionInfo(data) == nil)
        #expect(try f.context.data.unprotect(Data()) == Data())
    }

    @Test("base64 string variants round-trip")
    func base64Strings() throws {
        let f = try StateFixture()
        let text = "Grüße from Contoso"
        let protected = try f.context.data.protect(string: text, accountId: StateFixture.managedUPN)
        #expect(Data(base64Encoded: protected) != nil)
        #expect(try f.context.data.unprotect(string: protected) == text)
        #expect(throws: MAMError.invalidArguments("input is not base64")) { try f.context.data.unprotect(string: "***") }
    }

    @Test("a flipped bit anywhere in protected data is an authentication failure")
    func tamperedData() throws {
        let f = try StateFixture()
        let protected = try f.context.data.protect(Data(randomBytes(5000)), accountId: StateFixture.managedId)
        for index in stride(from: 8, to: protected.count, by: 97) {
            var bad = protected
            bad[index] ^= 0x10
            #expect(throws: MAMError.self) { try f.context.data.unprotect(bad) }
        }
    }
}
