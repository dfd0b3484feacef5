import Foundation
import Synchronization
import Testing
@testable import MAMProtection
import MAMTestSupport

/// The AES-GCM context kept with an account key (`SymmetricKey.withCipher`), which wraps and
/// unwraps the file keys of the headers it owns.
@Suite("Wrap context kept with an account key")
struct KeptWrapCipherTests {
    @Test("wrapping a file key keeps a context with the account key, and unwrapping through it gives the file key back")
    func accountKeyKeepsItsContext() throws {
        let accountKey = try SymmetricKey.random()
        #expect(!accountKey.keepsCipher)
        let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 1, accountKey: accountKey)
        #expect(accountKey.keepsCipher)
        #expect(!fileKey.keepsCipher, "a file key has a block cipher of its own, not a wrap context")
        #expect(try header.unwrapFileKey(accountKey: accountKey).copyBytes() == fileKey.copyBytes())
        let (second, secondKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 1, accountKey: accountKey)
        #expect(second.encryption?.wrappedFileKey != header.encryption?.wrappedFileKey)
        #expect(try second.unwrapFileKey(accountKey: accountKey).copyBytes() == secondKey.copyBytes())
    }

    @Test("a header that fails to unwrap leaves the kept context working for the next one")
    func failedUnwrapLeavesAWorkingContext() throws {
        let accountKey = try SymmetricKey.random()
        let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 1, accountKey: accountKey)
        var bytes = header.encoded()
        bytes[bytes.count - 1] ^= 0x01
        let tampered = try #require(try bytes.withUnsafeBytes { try ProtectedFileHeader.decode($0) })
        #expect(throws: MAMError.self) { try tampered.unwrapFileKey(accountKey: accountKey) }
        let otherKey = try SymmetricKey.random()
        #expect(throws: MAMError.self) { try header.unwrapFileKey(accountKey: otherKey) }
        #expect(try header.unwrapFileKey(accountKey: accountKey).copyBytes() == fileKey.copyBytes())
        let (next, nextKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 1, accountKey: accountKey)
        #expect(try next.unwrapFileKey(accountKey: accountKey).copyBytes() == nextKey.copyBytes())
    }

    @Test("threads wrapping and unwrapping under one account key at once each get their own file key back")
    func concurrentWrapsAndUnwraps() throws {
        let accountKey = try SymmetricKey.random()
        let mismatches = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<100 {
                do {
                    let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: FormatFixture.owner, keyId: 7, accountKey: accountKey)
                    if try header.unwrapFileKey(accountKey: accountKey).copyBytes() != fileKey.copyBytes() {
                        mismatches.add(1, ordering: .relaxed)
                    }
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(mismatches.load(ordering: .relaxed) == 0)
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(accountKey.keepsCipher)
    }
}
