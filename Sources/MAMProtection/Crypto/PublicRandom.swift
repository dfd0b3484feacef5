import Foundation

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
/// Thread-safe: one mutex around the pool. Fork-safe: `fork` waits for the pool's mutex
/// (`pthread_atfork` handlers), so a child never inherits it locked by a thread it does not
/// have, and the child empties its copy of the pool: it never hands out bytes its parent drew
/// before the fork and will hand out after.
enum PublicRandom {
    /// Bytes drawn per `RAND_bytes` call.
    static let poolSize = 4096
    /// Requests longer than this go straight to `RAND_bytes` (a quarter of the pool).
    static let largestPooled = 1024

    private static let pool: Pool = {
        let pool = Pool()
        pthread_atfork({ PublicRandom.pool.lock() },
                       { PublicRandom.pool.unlock() },
                       { PublicRandom.pool.left = 0; PublicRandom.pool.unlock() })
        return pool
    }()

    /// The pool and its mutex. Unchecked: `bytes` and `left` are only touched with the mutex
    /// held (the fork handlers hold it too).
    private final class Pool: @unchecked Sendable {
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: PublicRandom.poolSize, alignment: 16)
        /// Bytes not handed out yet: `bytes[0..<left]`.
        var left = 0
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

        init() { pthread_mutex_init(mutex, nil) }

        func lock() { pthread_mutex_lock(mutex) }
        func unlock() { pthread_mutex_unlock(mutex) }
    }

    /// Fills `buffer` with random bytes.
    /// - Throws: `MAMError.internalError` when `RAND_bytes` fails (nothing is handed out then).
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard buffer.count > 0 else { return }
        guard buffer.count <= largestPooled else { return try SecureRandom.fill(buffer) }
        let pool = self.pool
        pool.lock()
        defer { pool.unlock() }
        if pool.left < buffer.count {
            pool.left = 0
            try SecureRandom.fill(pool.bytes)
            pool.left = pool.bytes.count
        }
        pool.left -= buffer.count
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: pool.bytes[pool.left..<(pool.left + buffer.count)]))
    }

    /// `count` random bytes.
    /// - Throws: `MAMError.internalError` when `RAND_bytes` fails.
    static func bytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { try fill($0) }
        return bytes
    }

    /// How many bytes the pool holds that were not handed out yet (for tests).
    static var bytesLeft: Int {
        pool.lock()
        defer { pool.unlock() }
        return pool.left
    }
}
