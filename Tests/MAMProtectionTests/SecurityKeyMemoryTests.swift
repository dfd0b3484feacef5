import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// Records the bytes of every `SecretBuffer` released while it is installed.
final class ReleasedSecrets: @unchecked Sendable {
    private let lock = NSLock()
    private var released: [(address: UInt, bytes: [UInt8])] = []

    func install() {
        SecretBuffer.releaseObserver = { [self] bytes in
            let copy = Array(bytes)
            lock.lock(); released.append((UInt(bitPattern: bytes.baseAddress), copy)); lock.unlock()
        }
    }

    func uninstall() { SecretBuffer.releaseObserver = nil }

    var all: [(address: UInt, bytes: [UInt8])] {
        lock.lock(); defer { lock.unlock() }
        return released
    }
}

@Suite("Security: key bytes are wiped from memory", .serialized)
struct SecurityKeyMemoryTests {
    @Test("a released key leaves only zeros in its storage")
    func releasedKeyIsWiped() throws {
        let recorder = ReleasedSecrets()
        recorder.install()
        defer { recorder.uninstall() }
        var address: UInt = 0
        do {
            let key = try SymmetricKey(bytes: [UInt8](repeating: 0xA5, count: 32))
            address = key.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        }
        let mine = recorder.all.filter { $0.address == address }
        #expect(mine.count == 1, "the key's storage was released once")
        #expect(mine.allSatisfy { $0.bytes == [UInt8](repeating: 0, count: 32) })
    }

    @Test("unwrapping an account key and a file key writes into wiped buffers the keys keep; a failed unwrap leaves zeros")
    func unwrapUsesWipedBuffers() throws {
        let f = try StateFixture()
        let master = try SymmetricKey.random()
        let accountKey = try SymmetricKey(bytes: [UInt8](repeating: 0x5A, count: 32))
        let wrapped = try AESGCM(key: master).seal(key: accountKey, aad: Array("aad".utf8))

        let recorder = ReleasedSecrets()
        recorder.install()
        defer { recorder.uninstall() }
        var address: UInt = 0
        do {
            let secret = try #require(try AESGCM(key: master).openSecret(wrapped, aad: Array("aad".utf8)))
            let unwrapped = try SymmetricKey(adopting: secret)
            #expect(unwrapped.copyBytes() == [UInt8](repeating: 0x5A, count: 32))
            address = unwrapped.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
            #expect(address == UInt(bitPattern: secret.bytes.baseAddress), "the key keeps the unwrap buffer, no copy")
        }
        #expect(recorder.all.contains { $0.address == address && $0.bytes.allSatisfy { $0 == 0 } })

        // A wrong AAD: the buffer that received the (unauthenticated) output is wiped.
        let before = recorder.all.count
        #expect(try AESGCM(key: master).openSecret(wrapped, aad: Array("other".utf8)) == nil)
        let failed = recorder.all.dropFirst(before).filter { $0.bytes.count == 32 }
        #expect(!failed.isEmpty)
        #expect(failed.allSatisfy { $0.bytes.allSatisfy { $0 == 0 } })

        // The library's own paths: every secret released while files are encrypted and read is zero.
        let p = try f.write("doc.txt", Array("secret text".utf8))
        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedId)
        f.context.keys.invalidate()
        #expect(try f.plaintext(p) == Array("secret text".utf8))
        f.context.keys.invalidate()
        #expect(recorder.all.count > before + failed.count, "account and file keys were released through SecretBuffer")
        #expect(recorder.all.allSatisfy { $0.bytes.allSatisfy { $0 == 0 } })
    }
}
