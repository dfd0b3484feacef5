import CSystem
import Foundation

/// fallocate on plaintext.
extension ProtectedFileContent {
    /// fallocate(2) mode 0 on plaintext: makes `length` bytes at plaintext `offset` allocated,
    /// growing the file when the range ends past it. Encrypted files have no holes, so growing
    /// one writes encrypted zeros (like `truncate`); a plain one asks the backing filesystem,
    /// shifted by the header.
    /// - Throws: `MAMError.system` with EINVAL (negative offset, length not positive), EFBIG
    ///   (past `maximumPlaintextSize`), ENOSPC, EOPNOTSUPP (the backing filesystem has no
    ///   fallocate).
    public func allocate(offset: Int64, length: Int64) throws {
        guard length > 0 else { throw MAMError.system("allocate", errno: EINVAL) }
        let end = try checkedEnd(offset: offset, count: length, "allocate")
        if header?.isEncrypted == true {
            if end > (try plaintextSize()) { try truncate(to: end) }
            return
        }
        try writeHeaderIfMissing()
        while mamfs_fallocate(fd, 0, dataOffset + offset, length) != 0 {
            let code = errno
            if code == EINTR { continue }
            throw MAMError.system("allocate", errno: code)
        }
    }
}
