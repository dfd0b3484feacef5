import Foundation
import Synchronization

/// Random bytes for values that are stored in the clear: nonces, file ids. They come from
/// OpenSSL's CSPRNG like every other random byte here, but many small draws share one
/// `RAND_bytes` call: a process-wide pool of `poolSize` bytes is filled at once and handed out
/// from its end, each byte once.
///
/// One `RAND_bytes` call costs about 7,000 instructions whatever its length up to a few KiB
/// (the DRBG's lookup, lock and re-key); a file created through a mount took four of them
/// (its key, its id, its wrap nonce, its first block's nonces). Keys never come from here:
/// they are drawn by `SecureRandom` straight into the buffer that keeps them.
///
/// Thread-safe (one mutex around the pool). A forked child never hands out bytes its parent
/// drew before the fork (`ForkGeneration`): it fills the pool anew.
enum PublicRandom {
    /// Bytes drawn per `RAND_bytes` call.
    static let poolSize = 4096
    /// Requests longer than this go straight to `RAND_bytes` (they gain nothing from the pool).
    static let largestPooled = 1024

    /// Unchecked: its buffer is only touched under `pool`'s mutex.
    private struct Pool: @unchecked Sendable {
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: PublicRandom.poolSize, alignment: 16)
        /// Bytes not handed out yet: `bytes[0..<left]`.
        var left = 0
        /// `ForkGeneration.current` when the pool was filled.
        var generation: UInt64 = 0
    }

    private static let pool = Mutex(Pool())

    /// Fills `buffer` with random bytes.
    /// - Throws: `MAMError.internalError` when `RAND_bytes` fails (nothing is handed out then).
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard buffer.count > 0 else { return }
        guard buffer.count <= largestPooled else { return try SecureRandom.fill(buffer) }
        let generation = ForkGeneration.current
        try pool.withLock { pool in
            if pool.left < buffer.count || pool.generation != generation {
                pool.left = 0
                try SecureRandom.fill(pool.bytes)
                pool.left = pool.bytes.count
                pool.generation = generation
            }
            pool.left -= buffer.count
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: pool.bytes[pool.left..<(pool.left + buffer.count)]))
        }
    }

    /// `count` random bytes.
    /// - Throws: `MAMError.internalError` when `RAND_bytes` fails.
    static func bytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { try fill($0) }
        return bytes
    }
}
