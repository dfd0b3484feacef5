/// Where the blocks of a plaintext range are stored, for sending them to the disk early
/// (the mount's `SequentialWriteback`).
extension ProtectedFileContent {
    /// The backing byte range that stores the 4 KiB blocks from the one holding plaintext
    /// offset `start` up to, not including, the one holding `end` (both rounded down to a
    /// block boundary; an encrypted block's stored bytes lie whole inside the range). Empty
    /// when both offsets lie in the same block.
    /// - Returns: backing offsets, the header included (`dataOffset` + the body's bytes).
    public func storedRange(ofBlocksFrom start: Int64, before end: Int64) -> Range<Int64> {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let first = max(0, start) / bs
        let last = max(0, end) / bs
        guard last > first else { return dataOffset..<dataOffset }
        let stored = shape.isEncrypted ? Int64(BlockLayout.storedBlockSize) : bs
        return (dataOffset + first * stored)..<(dataOffset + last * stored)
    }
}
