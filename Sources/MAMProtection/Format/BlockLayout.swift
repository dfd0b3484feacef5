import Glibc

/// Geometry of the encrypted body (docs/FORMAT.md): 4096-byte plaintext blocks, each stored
/// as nonce (12) || ciphertext (same length) || tag (16). Only the last block may be short.
/// In a sparse file a stored block of only zero bytes is a hole.
public enum BlockLayout {
    /// Plaintext bytes per block.
    public static let plaintextBlockSize = 4096
    /// Stored bytes added to each block (nonce + tag).
    public static let overhead = AESGCM.nonceSize + AESGCM.tagSize
    /// Stored bytes of a full block.
    public static let storedBlockSize = plaintextBlockSize + overhead

    /// Plaintext size of an encrypted body of `bodyLength` stored bytes.
    /// - Returns: nil when the length cannot be produced by this format (a last block of 1...28
    ///   stored bytes): the file was truncated by someone else or is corrupt.
    public static func plaintextSize(bodyLength: Int64) -> Int64? {
        guard bodyLength >= 0 else { return nil }
        let full = bodyLength / Int64(storedBlockSize)
        let rest = bodyLength % Int64(storedBlockSize)
        if rest == 0 { return full * Int64(plaintextBlockSize) }
        guard rest > Int64(overhead) else { return nil }
        return full * Int64(plaintextBlockSize) + rest - Int64(overhead)
    }

    /// Stored body length for `plaintextSize` plaintext bytes (at most `largestPlaintextSize(bodyLength: .max)`;
    /// larger sizes answer Int64.max: use `storedBodyLength` where the size is not known to fit).
    public static func bodyLength(plaintextSize: Int64) -> Int64 {
        storedBodyLength(plaintextSize: plaintextSize) ?? .max
    }

    /// Stored body length for `plaintextSize` plaintext bytes.
    /// - Returns: nil for a negative size or one whose stored body does not fit in off_t (Int64).
    public static func storedBodyLength(plaintextSize: Int64) -> Int64? {
        guard plaintextSize >= 0 else { return nil }
        let full = plaintextSize / Int64(plaintextBlockSize)
        let rest = plaintextSize % Int64(plaintextBlockSize)
        let (blocks, overflow) = full.multipliedReportingOverflow(by: Int64(storedBlockSize))
        guard !overflow else { return nil }
        let (total, overflow2) = blocks.addingReportingOverflow(rest > 0 ? rest + Int64(overhead) : 0)
        return overflow2 ? nil : total
    }

    /// The largest plaintext size whose stored body is at most `bodyLength` bytes (0 for a
    /// negative or too short limit): the plaintext of the longest valid body within the limit.
    public static func largestPlaintextSize(bodyLength: Int64) -> Int64 {
        guard bodyLength > 0 else { return 0 }
        let full = bodyLength / Int64(storedBlockSize)
        let rest = bodyLength % Int64(storedBlockSize)
        return full * Int64(plaintextBlockSize) + max(0, rest - Int64(overhead))
    }

    /// A full stored block of zeros: what `isHole` compares with.
    private static let zeroBlock = [UInt8](repeating: 0, count: storedBlockSize)

    /// Whether the stored block `stored` (a whole slot: nonce, ciphertext and tag, at most
    /// `storedBlockSize` bytes) is all zero bytes, the way a sparse file stores a hole. The
    /// tag is looked at first: a sealed block's tag is zero with probability 2^-128.
    public static func isHole(_ stored: UnsafeRawBufferPointer) -> Bool {
        guard stored.count > overhead, stored.count <= storedBlockSize, let base = stored.baseAddress else { return false }
        return zeroBlock.withUnsafeBytes { zeros in
            memcmp(base + stored.count - AESGCM.tagSize, zeros.baseAddress!, AESGCM.tagSize) == 0
                && memcmp(base, zeros.baseAddress!, stored.count) == 0
        }
    }

    /// AAD of block `index` of the file with `fileId`: fileId (16) || index (u64 little-endian).
    static func blockAAD(fileId: [UInt8], index: Int64) -> [UInt8] {
        var aad = fileId
        withUnsafeBytes(of: UInt64(index).littleEndian) { aad += $0 }
        return aad
    }
}
