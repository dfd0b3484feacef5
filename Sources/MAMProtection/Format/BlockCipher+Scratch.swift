/// The buffers one read or write needs, kept with the cipher that its taker owns until `keep`:
/// a small write or read no longer allocates a plaintext block and a stored block per request
/// (an aligned allocation each, and the staging block wiped in full every time).
extension BlockCipher {
    /// A staging block of `BlockLayout.plaintextBlockSize` bytes for this request's partial
    /// blocks. Plaintext put there must be wiped (`wipeStaging`) before the cipher is kept.
    var staging: UnsafeMutableRawPointer {
        if let stagingBuffer { return stagingBuffer.baseAddress! }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.plaintextBlockSize, alignment: 16)
        stagingBuffer = buffer
        return buffer.baseAddress!
    }

    /// Wipes the first `count` bytes of the staging block (0: nothing was staged).
    func wipeStaging(_ count: Int) {
        guard count > 0, let stagingBuffer else { return }
        SecureWipe.bytes(stagingBuffer.baseAddress, count: min(count, stagingBuffer.count))
    }

    /// Runs `body` with room for the stored bytes of `blocks` blocks (`BlockLayout.storedBlockSize`
    /// each): the kept one-block buffer, or for more blocks one allocated for this call. The
    /// buffer holds ciphertext only.
    func withStoredBuffer<R>(blocks: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        guard blocks == 1 else {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: blocks * BlockLayout.storedBlockSize, alignment: 16)
            defer { buffer.deallocate() }
            return try body(buffer)
        }
        if let oneBlockStoredBuffer { return try body(oneBlockStoredBuffer) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.storedBlockSize, alignment: 16)
        oneBlockStoredBuffer = buffer
        return try body(buffer)
    }

    /// Frees the kept buffers, the staging block wiped first (the cipher's deinit).
    func releaseScratch() {
        if let stagingBuffer {
            SecureWipe.bytes(stagingBuffer.baseAddress, count: stagingBuffer.count)
            stagingBuffer.deallocate()
        }
        oneBlockStoredBuffer?.deallocate()
        stagingBuffer = nil
        oneBlockStoredBuffer = nil
    }
}
