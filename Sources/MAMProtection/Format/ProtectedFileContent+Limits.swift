import Foundation

/// The largest file the format can store, and the range checks every offset and size from a
/// caller (a FUSE request, the CLI) goes through before any arithmetic on it.
///
/// A backing file cannot be larger than off_t (Int64.max bytes), so the largest plaintext is
/// the largest whose stored size (header, plus the encrypted blocks' nonces and tags) still
/// fits. Past it the answer is EFBIG, as ext4 answers past its own maximum file size; negative
/// offsets and lengths are EINVAL.
extension ProtectedFileContent {
    /// Largest plaintext size (bytes) of a file with `header`: Int64.max for an untagged file,
    /// Int64.max minus the header for a plain one, about Int64.max * 4096 / 4124 for an
    /// encrypted one.
    public static func maximumPlaintextSize(header: ProtectedFileHeader?) -> Int64 {
        guard let header else { return .max }
        let body = Int64.max - Int64(header.length)
        return header.isEncrypted ? BlockLayout.largestPlaintextSize(bodyLength: body) : body
    }

    /// `maximumPlaintextSize(header:)` of this file.
    public var maximumPlaintextSize: Int64 { ProtectedFileContent.maximumPlaintextSize(header: header) }

    /// Backing size (bytes) of a file with `plaintextSize` bytes of content under `header`.
    /// - Returns: nil for a negative size or one past `maximumPlaintextSize(header:)`.
    public static func checkedStoredSize(plaintextSize: Int64, header: ProtectedFileHeader?) -> Int64? {
        guard plaintextSize >= 0, plaintextSize <= maximumPlaintextSize(header: header) else { return nil }
        guard let header else { return plaintextSize }
        let body = header.isEncrypted ? BlockLayout.storedBodyLength(plaintextSize: plaintextSize) : plaintextSize
        return body.map { $0 + Int64(header.length) }
    }

    /// The plaintext end (`offset + count`) of a range a caller asked for.
    /// - Throws: `MAMError.system(errno: EINVAL)` for a negative offset or count,
    ///   `EFBIG` when the end lies past `maximumPlaintextSize`.
    func checkedEnd(offset: Int64, count: Int64, _ operation: String) throws -> Int64 {
        guard offset >= 0, count >= 0 else { throw MAMError.system(operation, errno: EINVAL) }
        guard offset <= maximumPlaintextSize - count else { throw MAMError.system(operation, errno: EFBIG) }
        return offset + count
    }
}
