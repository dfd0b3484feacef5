import Glibc

/// Wiping plaintext and key bytes before their memory is freed or used again.
public enum SecureWipe {
    /// Zeroes `count` bytes at `pointer` (nil or a count of 0: nothing) with glibc's
    /// `explicit_bzero(3)`, a store the compiler may not drop as dead, as `OPENSSL_cleanse`
    /// promises too. It runs at `memset`'s speed: OpenSSL's x86-64 cleanse stores 8 bytes per
    /// loop turn, about 2,600 instructions for a 4 KiB block, on every block a write merges.
    @inline(__always)
    public static func bytes(_ pointer: UnsafeMutableRawPointer?, count: Int) {
        guard let pointer, count > 0 else { return }
        explicit_bzero(pointer, count)
    }
}
