import MAMSystem
import Foundation

/// Space reservation that gives back what it got when it fails, and fallocate on plaintext.
///
/// ext4 keeps the blocks a failed fallocate allocated before it ran out of space (with
/// FALLOC_FL_KEEP_SIZE they sit past the end of the file, invisible in its size, until it is
/// deleted). Truncating to the unchanged size frees every block past the end (ext4 truncates
/// its preallocated blocks then, tmpfs too), so that is how a failed reservation is released.
extension ProtectedFileContent {
    /// Reserves `length` backing bytes at backing `offset` (at or past the current end) before
    /// a write; on failure the backing file holds no more blocks than before.
    /// - Throws: `MAMError.system(errno: ENOSPC)` (or another errno) when the space is not there.
    func reserveSpace(offset: Int64, length: Int64) throws {
        guard length > 0 else { return }
        let sizeBefore = try FileIO.size(fd)
        do {
            try FileIO.reserve(fd, offset: offset, length: length)
        } catch {
            releaseSpace(pastStoredSize: sizeBefore)
            throw error
        }
    }

    /// Frees every block past `storedSize` bytes (the file's size before a failed reservation).
    func releaseSpace(pastStoredSize storedSize: Int64) {
        while ftruncate(fd, off_t(storedSize)) != 0 && errno == EINTR {}
    }

    /// fallocate(2) mode 0 on plaintext: makes `length` bytes at plaintext `offset` allocated,
    /// growing the file when the range ends past it. Encrypted files have no holes, so growing
    /// one writes encrypted zeros (like `truncate`); a plain one asks the backing filesystem,
    /// shifted by the header.
    /// - Throws: `MAMError.system` with EINVAL (negative offset, length not positive), EFBIG
    ///   (past `maximumPlaintextSize`), ENOSPC, EOPNOTSUPP (the backing filesystem has no
    ///   fallocate). On failure the file keeps its size and holds no new blocks past its end.
    public func allocate(offset: Int64, length: Int64) throws {
        guard length > 0 else { throw MAMError.system("allocate", errno: EINVAL) }
        let end = try checkedEnd(offset: offset, count: length, "allocate")
        if header?.isEncrypted == true {
            if end > (try plaintextSize()) { try truncate(to: end) }
            return
        }
        try writeHeaderIfMissing()
        let sizeBefore = try FileIO.size(fd)
        do {
            try SystemCall.fallocate(fd: fd, mode: 0, offset: dataOffset + offset, length: length)
        } catch {
            releaseSpace(pastStoredSize: sizeBefore)
            throw MAMError.system("allocate", errno: error.rawValue)
        }
    }
}
