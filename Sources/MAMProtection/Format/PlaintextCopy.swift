import COpenSSL
import CSystem
import Dispatch
import Foundation
import Synchronization

/// Copies every plaintext byte of one file into a new file, on several threads: the whole-file
/// rewrites of `encryptFile`, `decryptFile` and `protect` (`FileProtectionManager`).
///
/// The destination is new and seen by no one until the caller publishes it (an unnamed
/// O_TMPFILE linked in by `AtomicFileWriter.commit`, or a memfd streamed out afterwards), so
/// its pieces may be stored in any order and a failure leaves nothing to repair: the caller
/// drops the file. The plaintext is cut into chunks of `chunkSize` bytes (a multiple of the
/// 4 KiB block); each worker takes the next chunk, reads it from the source (decrypting when
/// the source is encrypted; concurrent `ProtectedFileContent.read` calls are safe) and stores
/// it at its final place in the destination: every block of an encrypted destination is
/// sealed with its own index in the AAD (docs/FORMAT.md), so where a block lies is fixed by
/// its index and not by the order of the writes. Each worker has its own cipher context, nonce
/// pool and buffers; the plaintext buffers are cleansed before they are freed.
///
/// No space is reserved (fallocate) first, unlike `ProtectedFileContent.write`, whose
/// "ENOSPC before any ciphertext" rule protects a file that already exists. On tmpfs a
/// reservation allocates and zeroes every page that the write then fills again.
struct PlaintextCopy {
    /// Plaintext bytes per chunk: a multiple of `BlockLayout.plaintextBlockSize`.
    static let chunkSize = 1 << 20
    /// Workers at most, whatever the machine has.
    static let maximumWorkers = 4

    let source: ProtectedFileContent
    let destination: ProtectedFileContent

    /// Copies the first `size` plaintext bytes of the source (its size when the copy starts)
    /// into the destination, whose header (if any) is written first.
    ///
    /// - Parameters:
    ///   - size: plaintext bytes to copy.
    ///   - workers: threads to use (1: the calling thread only); `PlaintextCopy.workers(for:)`.
    /// - Throws: what reading the source throws (`.authenticationFailed` for a damaged block,
    ///   `.system` on I/O errors); `.system` with EAGAIN when the source got shorter during the
    ///   copy (the result would have a gap); `.system` (ENOSPC, EIO, ...) when storing fails.
    ///   The first failure stops the other workers; the destination is then incomplete and
    ///   must be dropped.
    func run(size: Int64, workers: Int) throws {
        try destination.writeHeaderIfMissing(reserve: false)
        guard size > 0 else { return }
        let chunks = Int((size + Int64(PlaintextCopy.chunkSize) - 1) / Int64(PlaintextCopy.chunkSize))
        let threads = max(1, min(workers, chunks))
        let progress = Progress(chunks: chunks)
        if threads == 1 {
            try work(size: size, progress: progress)
            return
        }
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            do {
                try work(size: size, progress: progress)
            } catch {
                progress.fail(error)
            }
        }
        if let failure = progress.failure { throw failure }
    }

    /// One worker: takes chunks until none is left or another worker failed.
    private func work(size: Int64, progress: Progress) throws {
        let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: PlaintextCopy.chunkSize, alignment: 16)
        defer {
            SecureWipe.bytes(plain.baseAddress, count: plain.count)
            plain.deallocate()
        }
        let store = try ChunkStore(destination: destination)
        while let chunk = progress.next() {
            let offset = Int64(chunk) * Int64(PlaintextCopy.chunkSize)
            let expected = Int(min(Int64(PlaintextCopy.chunkSize), size - offset))
            let piece = UnsafeMutableRawBufferPointer(rebasing: plain[0..<expected])
            let got = try source.read(into: piece, at: offset)
            guard got == expected else {
                throw MAMError.system("the source got shorter while it was copied (\(offset + Int64(got)) of \(size) bytes)",
                                      errno: EAGAIN)
            }
            try store.store(UnsafeRawBufferPointer(piece), at: offset)
        }
    }

    /// The number of workers for a copy of `size` bytes: one per CPU this process may run on
    /// (its affinity mask), at most `maximumWorkers`, and 1 for a copy of a single chunk.
    static func workers(for size: Int64) -> Int {
        guard size > Int64(chunkSize) else { return 1 }
        return max(1, min(maximumWorkers, allowedCPUs()))
    }

    /// CPUs in this thread's affinity mask (sched_getaffinity); 1 when it cannot be read.
    static func allowedCPUs() -> Int {
        max(1, Int(mamfs_allowed_cpus()))
    }
}

extension PlaintextCopy {
    /// Hands out chunk numbers in order and keeps the first failure; shared by the workers.
    final class Progress: Sendable {
        private let state: Mutex<(next: Int, failure: (any Error)?)>
        private let chunks: Int

        init(chunks: Int) {
            self.chunks = chunks
            state = Mutex((next: 0, failure: nil))
        }

        /// The next chunk to copy; nil when all are taken or a worker failed.
        func next() -> Int? {
            state.withLock { state in
                guard state.failure == nil, state.next < chunks else { return nil }
                defer { state.next += 1 }
                return state.next
            }
        }

        func fail(_ error: any Error) {
            state.withLock { state in
                if state.failure == nil { state.failure = error }
            }
        }

        var failure: (any Error)? { state.withLock { $0.failure } }
    }

    /// Stores plaintext chunks at their place in one destination: sealed block by block into
    /// a staging buffer and written with one pwrite when the destination is encrypted, written
    /// as they are (after the header) when it is not. One per worker.
    final class ChunkStore {
        private let destination: ProtectedFileContent
        private let cipher: BlockCipher?
        private let staging: UnsafeMutableRawBufferPointer?

        init(destination: ProtectedFileContent) throws {
            self.destination = destination
            if let header = destination.header, let fileId = header.encryption?.fileId, let key = destination.fileKey {
                cipher = try BlockCipher(key: key, fileId: fileId)
                let blocks = PlaintextCopy.chunkSize / BlockLayout.plaintextBlockSize
                staging = UnsafeMutableRawBufferPointer.allocate(byteCount: blocks * BlockLayout.storedBlockSize, alignment: 16)
            } else {
                cipher = nil
                staging = nil
            }
        }

        deinit { staging?.deallocate() }

        /// Stores `plain` at plaintext `offset`, a multiple of the block size; only the file's
        /// last chunk may end inside a block.
        func store(_ plain: UnsafeRawBufferPointer, at offset: Int64) throws {
            guard let cipher, let staging else {
                try FileIO.pwriteFully(destination.fd, plain, at: destination.dataOffset + offset)
                return
            }
            let bs = BlockLayout.plaintextBlockSize
            let firstBlock = offset / Int64(bs)
            let blocks = (plain.count + bs - 1) / bs
            var stored = 0
            for b in 0..<blocks {
                // One nonce draw per pool's worth of blocks (a chunk is 256 blocks).
                if b % BlockCipher.noncePoolCapacity == 0 { try cipher.expectBlocks(blocks - b) }
                let length = min(bs, plain.count - b * bs)
                try cipher.seal(index: firstBlock + Int64(b),
                                plaintext: UnsafeRawBufferPointer(start: plain.baseAddress! + b * bs, count: length),
                                into: staging.baseAddress! + stored)
                stored += length + BlockLayout.overhead
            }
            try FileIO.pwriteFully(destination.fd, UnsafeRawBufferPointer(rebasing: staging[0..<stored]),
                                   at: destination.dataOffset + firstBlock * Int64(BlockLayout.storedBlockSize))
        }
    }
}
