/// The buffers one read or write needs, kept with the cipher that its taker owns until `keep`:
/// a small write or read no longer allocates a plaintext block and a stored block per request
/// (an aligned allocation each, and the staging block wiped in full every time).
extension BlockCipher {
    /// The staging block (`BlockLayout.plaintextBlockSize` bytes) for this request's partial
    /// blocks, of which the caller uses the first `count`. Whatever was staged is wiped by
    /// `keep` (`wipeStaging`), or in full when the cipher goes: no caller tracks it.
    func staging(_ count: Int) -> UnsafeMutableRawPointer {
        precondition(count <= BlockLayout.plaintextBlockSize)
        stagedBytes = max(stagedBytes, count)
        if let stagingBuffer { return stagingBuffer.baseAddress! }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.plaintextBlockSize, alignment: 16)
        stagingBuffer = buffer
        return buffer.baseAddress!
    }

    /// Wipes the bytes of the staging block handed out since the last wipe.
    func wipeStaging() {
        guard stagedBytes > 0, let stagingBuffer else { return }
        SecureWipe.bytes(stagingBuffer.baseAddress, count: stagedBytes)
        stagedBytes = 0
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
