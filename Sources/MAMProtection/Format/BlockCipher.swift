import COpenSSL
import Foundation
import Synchronization

/// Seals and opens the 4 KiB blocks of one encrypted file body (docs/FORMAT.md).
///
/// Everything per-block is reused: one cipher context (key schedule set once), one AAD buffer
/// holding fileId || index with the index rewritten in place, and a pool of nonces filled by one
/// draw from `PublicRandom` per batch of blocks. Before this existed each block allocated its AAD and
/// called `RAND_bytes` for 12 bytes (a DRBG round plus a getpid syscall), which cost more than
/// the AES-GCM itself (docs/PERFORMANCE.md).
///
/// One instance outlives a call: `take` and `keep` keep it with its file key
/// (`SymmetricKey.blockCiphers`), so the next read or write of the same file skips the context
/// set-up and usually the nonce draw too. Its key schedule lives exactly as long as the
/// key bytes it was made from. Not thread-safe: a caller has the instance to itself between
/// `take` and `keep` (so it is `Sendable` only in the sense that the key's mutex hands it from
/// one thread to the next).
final class BlockCipher: @unchecked Sendable {
    /// Most nonces drawn at once (one write chunk's worth).
    static let noncePoolCapacity = 64

    private let cipher: AESGCM
    /// fileId (16 bytes) || index (u64 little-endian), as `BlockLayout.blockAAD`.
    private let aad: UnsafeMutableRawBufferPointer
    private let indexOffset: Int
    private let nonces: UnsafeMutableRawBufferPointer
    private var noncesLeft = 0
    /// `ForkGeneration.current` when the pool was drawn: a forked child never takes a nonce its
    /// parent may take too.
    private var poolGeneration: UInt64 = 0
    /// The request buffers (`BlockCipher+Scratch.swift`), made on first use and kept with the
    /// cipher: a plaintext block for merging partial blocks, and one block's stored bytes.
    var stagingBuffer: UnsafeMutableRawBufferPointer?
    /// How many bytes at the start of the staging block may hold plaintext now.
    var stagedBytes = 0
    var oneBlockStoredBuffer: UnsafeMutableRawBufferPointer?
    /// The last partial block a write merged and sealed (`BlockCipher+Memo.swift`).
    var sealedMemo: SealedBlockMemo?
    /// The block the last merging write sealed while no memo was made yet (-1: none).
    var mergedBlock: Int64 = -1

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
        releaseScratch()
    }

    /// A cipher for `key` and `fileId`: the one kept with `key` since an earlier call (its AAD
    /// set to `fileId`) unless another thread has it, else a new one. The caller has it to
    /// itself until it passes it to `keep(_:with:)`.
    /// - Throws: `MAMError.internalError` if OpenSSL cannot set up a new cipher.
    static func take(key: SymmetricKey, fileId: [UInt8]) throws -> BlockCipher {
        let kept = key.blockCiphers.withLock { slot -> BlockCipher? in
            guard let cipher = slot.take(), cipher.rebind(fileId: fileId) else { return nil }
            return cipher
        }
        return try kept ?? BlockCipher(key: key, fileId: fileId)
    }

    /// Keeps `cipher`, taken for `key` and no longer used by the caller, with `key` for the next
    /// `take`, unless another is kept there already.
    /// Plaintext the request staged is wiped first (`BlockCipher+Scratch`).
    static func keep(_ cipher: BlockCipher, with key: SymmetricKey) {
        cipher.wipeStaging()
        key.blockCiphers.withLock { slot in if slot == nil { slot = cipher } }
    }

    /// Sets the AAD's fileId; false (nothing changed) for a fileId of another length. A new
    /// fileId drops the memo of the last sealed block, which was sealed under the old one.
    private func rebind(fileId: [UInt8]) -> Bool {
        guard fileId.count == indexOffset else { return false }
        let same = fileId.withUnsafeBytes { memcmp(aad.baseAddress!, $0.baseAddress!, indexOffset) == 0 }
        if !same {
            forgetSealed()
            fileId.withUnsafeBytes { aad.copyMemory(from: $0) }
        }
        return true
    }

    /// Makes sure the pool holds nonces for the `count` blocks (at most a pool's worth) the
    /// caller is about to seal: when it holds fewer (or was drawn before a fork), the rest is
    /// dropped unused and `count` nonces are taken from `PublicRandom` in one draw. A hint
    /// only: every seal takes a nonce of its own, drawing again when the pool runs out.
    func expectBlocks(_ count: Int) throws {
        let wanted = min(max(count, 1), BlockCipher.noncePoolCapacity)
        guard noncesLeft < wanted || poolGeneration != ForkGeneration.current else { return }
        try drawNonces(wanted)
    }

    /// Nonces a seal draws when the pool is empty and no caller said how many blocks follow
    /// (a hole's zero blocks, a single block): enough that a run of blocks does not take the
    /// shared pool's lock for each.
    static let unannouncedDraw = 16

    private func drawNonces(_ count: Int) throws {
        let generation = ForkGeneration.current
        noncesLeft = 0
        try PublicRandom.fill(UnsafeMutableRawBufferPointer(rebasing: nonces[0..<(count * AESGCM.nonceSize)]))
        noncesLeft = count
        poolGeneration = generation
    }

    private func setIndex(_ index: Int64) -> UnsafeRawBufferPointer {
        aad.storeBytes(of: UInt64(index).littleEndian, toByteOffset: indexOffset, as: UInt64.self)
        return UnsafeRawBufferPointer(aad)
    }

    /// Encrypts `plaintext` (at most one block) as block `index` into `stored`, which receives
    /// nonce (12) || ciphertext || tag (16) = `plaintext.count + BlockLayout.overhead` bytes.
    /// Each nonce is used once: it is taken from the pool and the pool never rewinds.
    func seal(index: Int64, plaintext: UnsafeRawBufferPointer, into stored: UnsafeMutableRawPointer) throws {
        if noncesLeft == 0 || poolGeneration != ForkGeneration.current { try drawNonces(BlockCipher.unannouncedDraw) }
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
            SecureWipe.bytes(target, count: length)
            throw MAMError.authenticationFailed("block \(index) does not authenticate")
        }
    }
}
