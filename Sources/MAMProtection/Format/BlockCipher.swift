import COpenSSL
import Foundation

/// Seals and opens the 4 KiB blocks of one encrypted file body (docs/FORMAT.md) for the length
/// of one read, write or truncate call.
///
/// Everything per-block is reused: one cipher context (key schedule set once), one AAD buffer
/// holding fileId || index with the index rewritten in place, and a pool of nonces filled by one
/// `RAND_bytes` call per batch of blocks. Before this existed each block allocated its AAD and
/// called `RAND_bytes` for 12 bytes (a DRBG round plus a getpid syscall), which cost more than
/// the AES-GCM itself (docs/PERFORMANCE.md). Not thread-safe: one instance per call.
final class BlockCipher {
    /// Nonces drawn per `RAND_bytes` call at most (one write chunk's worth).
    static let noncePoolCapacity = 64

    private let cipher: AESGCM
    /// fileId (16 bytes) || index (u64 little-endian), as `BlockLayout.blockAAD`.
    private let aad: UnsafeMutableRawBufferPointer
    private let indexOffset: Int
    private let nonces: UnsafeMutableRawBufferPointer
    private var noncesLeft = 0

    /// - Throws: `MAMError.internalError` if OpenSSL cannot set up the cipher.
    init(key: SymmetricKey, fileId: [UInt8]) throws {
        cipher = try AESGCM(key: key)
        indexOffset = fileId.count
        let aad = UnsafeMutableRawBufferPointer.allocate(byteCount: fileId.count + 8, alignment: 8)
        fileId.withUnsafeBytes { aad.copyMemory(from: $0) }
        self.aad = aad
        nonces = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockCipher.noncePoolCapacity * AESGCM.nonceSize, alignment: 16)
    }

    deinit {
        aad.deallocate()
        nonces.deallocate()
    }

    /// Tells the pool how many blocks the caller is about to seal, so that one `RAND_bytes`
    /// call draws exactly the nonces needed (up to the pool's capacity).
    func expectBlocks(_ count: Int) throws {
        guard noncesLeft == 0 else { return }
        let wanted = max(1, min(count, BlockCipher.noncePoolCapacity))
        try SecureRandom.fill(UnsafeMutableRawBufferPointer(rebasing: nonces[0..<(wanted * AESGCM.nonceSize)]))
        noncesLeft = wanted
    }

    private func setIndex(_ index: Int64) -> UnsafeRawBufferPointer {
        aad.storeBytes(of: UInt64(index).littleEndian, toByteOffset: indexOffset, as: UInt64.self)
        return UnsafeRawBufferPointer(aad)
    }

    /// Encrypts `plaintext` (at most one block) as block `index` into `stored`, which receives
    /// nonce (12) || ciphertext || tag (16) = `plaintext.count + BlockLayout.overhead` bytes.
    /// Each nonce is used once: it is taken from the pool and the pool never rewinds.
    func seal(index: Int64, plaintext: UnsafeRawBufferPointer, into stored: UnsafeMutableRawPointer) throws {
        if noncesLeft == 0 { try expectBlocks(1) }
        noncesLeft -= 1
        stored.copyMemory(from: nonces.baseAddress! + noncesLeft * AESGCM.nonceSize, byteCount: AESGCM.nonceSize)
        try cipher.seal(nonce: UnsafeRawBufferPointer(start: stored, count: AESGCM.nonceSize), aad: setIndex(index),
                        plaintext: plaintext, ciphertext: stored + AESGCM.nonceSize,
                        tag: stored + AESGCM.nonceSize + plaintext.count)
    }

    /// Decrypts stored block `index` (nonce || ciphertext || tag) into `target`
    /// (`stored.count - BlockLayout.overhead` bytes).
    /// - Throws: `MAMError.authenticationFailed` (and clears `target`) when the block does not
    ///   authenticate.
    func open(index: Int64, stored: UnsafeRawBufferPointer, into target: UnsafeMutableRawPointer) throws {
        let length = stored.count - BlockLayout.overhead
        let base = stored.baseAddress!
        let ok = try cipher.open(nonce: UnsafeRawBufferPointer(start: base, count: AESGCM.nonceSize), aad: setIndex(index),
                                 ciphertext: UnsafeRawBufferPointer(start: base + AESGCM.nonceSize, count: length),
                                 tag: UnsafeRawBufferPointer(start: base + AESGCM.nonceSize + length, count: AESGCM.tagSize),
                                 plaintext: target)
        guard ok else {
            OPENSSL_cleanse(target, length)
            throw MAMError.authenticationFailed("block \(index) does not authenticate")
        }
    }
}
