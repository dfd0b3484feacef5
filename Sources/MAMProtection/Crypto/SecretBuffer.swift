import COpenSSL
import Foundation

/// Heap bytes that hold key material (a key, an unwrapped key, a passphrase): zero-filled when
/// made and wiped (`SecureWipe`, explicit_bzero) before they are freed, so no copy of a key stays in
/// freed heap. Swift arrays cannot promise that (a copy-on-write or a growth leaves the old
/// storage behind unwiped), so secrets live in these instead.
final class SecretBuffer: @unchecked Sendable {
    /// The bytes (`count` long). Do not let pointers into them escape the buffer's lifetime.
    let bytes: UnsafeMutableRawBufferPointer

    /// Test seam: sees the bytes of every buffer after they were wiped, just before they are
    /// freed. Runs on the releasing thread.
    nonisolated(unsafe) static var releaseObserver: ((UnsafeRawBufferPointer) -> Void)?

    /// A zero-filled buffer of `count` bytes (at least 1 is allocated).
    init(count: Int) {
        bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 0), alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
    }

    /// The number of bytes.
    var count: Int { bytes.count }

    deinit {
        SecureWipe.bytes(bytes.baseAddress, count: bytes.count)
        SecretBuffer.releaseObserver?(UnsafeRawBufferPointer(bytes))
        bytes.deallocate()
    }
}
