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
        maximumPlaintextSize(headerLength: header.map { Int64($0.length) }, isEncrypted: header?.isEncrypted ?? false)
    }

    /// `maximumPlaintextSize(header:)` from the header's length (nil: untagged) and kind.
    static func maximumPlaintextSize(headerLength: Int64?, isEncrypted: Bool) -> Int64 {
        guard let headerLength else { return .max }
        let body = Int64.max - headerLength
        return isEncrypted ? BlockLayout.largestPlaintextSize(bodyLength: body) : body
    }

    /// `maximumPlaintextSize(header:)` of this file.
    public var maximumPlaintextSize: Int64 { shape.maximumPlaintextSize }

    /// Backing size (bytes) of a file with `plaintextSize` bytes of content under `header`.
    /// - Returns: nil for a negative size or one past `maximumPlaintextSize(header:)`.
    public static func checkedStoredSize(plaintextSize: Int64, header: ProtectedFileHeader?) -> Int64? {
        checkedStoredSize(plaintextSize: plaintextSize, headerLength: header.map { Int64($0.length) },
                          isEncrypted: header?.isEncrypted ?? false)
    }

    /// `checkedStoredSize(plaintextSize:header:)` from the header's length (nil: untagged) and kind.
    static func checkedStoredSize(plaintextSize: Int64, headerLength: Int64?, isEncrypted: Bool) -> Int64? {
        guard plaintextSize >= 0,
              plaintextSize <= maximumPlaintextSize(headerLength: headerLength, isEncrypted: isEncrypted) else { return nil }
        guard let headerLength else { return plaintextSize }
        let body = isEncrypted ? BlockLayout.storedBodyLength(plaintextSize: plaintextSize) : plaintextSize
        return body.map { $0 + headerLength }
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
