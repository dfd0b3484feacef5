import MAMSystem

/// Early writeback: the stored bytes of a range of whole blocks sent to the disk now, without
/// waiting, instead of when the kernel's dirty thresholds or an fsync get to them.
extension ProtectedFileContent {
    /// The backing byte range that stores plaintext `range` after both its ends are rounded
    /// down to 4 KiB block boundaries (an encrypted block's stored bytes lie whole inside it);
    /// empty when the range holds no whole block.
    /// - Returns: backing offsets, the header included (`dataOffset` + the body's bytes).
    public func storedRange(ofWholeBlocks range: Range<Int64>) -> Range<Int64> {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let first = max(0, range.lowerBound) / bs
        let end = max(0, range.upperBound) / bs
        guard end > first else { return dataOffset..<dataOffset }
        let stored = shape.isEncrypted ? Int64(BlockLayout.storedBlockSize) : bs
        return (dataOffset + first * stored)..<(dataOffset + end * stored)
    }

    /// Starts the disk writeback of the stored bytes of plaintext `range` (`storedRange(ofWholeBlocks:)`)
    /// and returns without waiting (`SystemCall.startWriteback`, sync_file_range(2)).
    /// A hint only: pages it does not start are written back by the kernel later, and an
    /// fsync makes the file durable as before and reports a failed writeback, so a failure
    /// here is not thrown.
    /// - Returns: the backing bytes asked for (empty: nothing to write, or the call failed).
    @discardableResult
    public func startWriteback(plaintext range: Range<Int64>) -> Range<Int64> {
        let stored = storedRange(ofWholeBlocks: range)
        guard !stored.isEmpty else { return stored }
        do {
            try SystemCall.startWriteback(fd: fd, offset: stored.lowerBound, length: Int64(stored.count))
        } catch {
            return stored.lowerBound..<stored.lowerBound
        }
        return stored
    }
}
