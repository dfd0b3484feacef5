import MAMSystem
import Foundation

/// Space reservation that gives back what it got when it fails, and fallocate on plaintext.
///
/// ext4 keeps the blocks a failed fallocate allocated before it ran out of space (with
/// FALLOC_FL_KEEP_SIZE they sit past the end of the file, invisible in its size, until it is
/// deleted). Truncating to the unchanged size frees every block past the end (ext4 truncates
/// its preallocated blocks then, tmpfs too), so that is how a failed reservation is released.
extension ProtectedFileContent {
    /// Reserves `length` backing bytes at backing `offset` (inside the file or past its end)
    /// without changing the size; on failure the backing file holds no more blocks past its
    /// end than before (and none reserved earlier past it either).
    /// `sizeBefore`: the backing size now, when the caller has just read it (one fstat less).
    /// - Throws: `MAMError.system(errno: ENOSPC)` (or another errno) when the space is not there.
    func reserveSpace(offset: Int64, length: Int64, sizeBefore knownSize: Int64? = nil) throws {
        guard length > 0 else { return }
        let sizeBefore = try knownSize ?? FileIO.size(fd)
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

    /// fallocate(2) on plaintext `offset..<offset+length` in `mode`.
    ///
    /// An untagged or plain-tagged file passes the call to the backing file, shifted by the
    /// header. An encrypted file keeps the format's guarantees: allocation reserves the stored
    /// blocks of the range (and grows the file like `truncate` without KEEP_SIZE); a punched
    /// or zeroed range reads as zeros: the blocks it covers whole become holes (punched out of
    /// the backing file, or zeroed and kept allocated), the partial blocks at its edges are
    /// decrypted, zeroed there and sealed again.
    /// - Throws: `MAMError.system` with EINVAL (negative offset, length not positive), EFBIG
    ///   (past `maximumPlaintextSize`), ENOSPC, EOPNOTSUPP (the backing filesystem lacks the
    ///   mode for a plain file); `.authenticationFailed` for an edge block that does not
    ///   authenticate. A failed reservation leaves the size as it was and no new blocks past
    ///   the end.
    public func allocate(_ mode: AllocationMode, offset: Int64, length: Int64) throws {
        guard length > 0 else { throw MAMError.system("allocate", errno: EINVAL) }
        let end = try checkedEnd(offset: offset, count: length, "allocate")
        try writeHeaderIfMissing()
        guard shape.isEncrypted else {
            let sizeBefore = try FileIO.size(fd)
            do throws(Errno) {
                try SystemCall.fallocate(fd: fd, mode: mode.flags, offset: dataOffset + offset, length: length)
            } catch {
                if mode != .punchHole { releaseSpace(pastStoredSize: sizeBefore) }
                throw MAMError.system("allocate", errno: error.rawValue)
            }
            return
        }
        let size = try plaintextSize()
        switch mode {
        case .allocate(let keepSize):
            try reserveBlocks(offset: offset, end: end, size: size)
            if !keepSize { try grow(from: size, to: end) }
        case .punchHole:
            try zeroEncrypted(offset: offset, end: end, keepAllocated: false)
        case .zeroRange(let keepSize):
            try reserveBlocks(offset: offset, end: end, size: size)
            if !keepSize { try grow(from: size, to: end) }
            try zeroEncrypted(offset: offset, end: end, keepAllocated: true)
        }
    }

    /// fallocate(2) mode 0: `allocate(.allocate(keepSize: false), offset:length:)`.
    public func allocate(offset: Int64, length: Int64) throws {
        try allocate(.allocate(keepSize: false), offset: offset, length: length)
    }

    /// Reserves the stored blocks of plaintext `offset..<end` of an encrypted file of `size`
    /// bytes (the last one at the length it has or will have), without changing the size.
    private func reserveBlocks(offset: Int64, end: Int64, size: Int64) throws {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let first = offset / bs
        let last = (end - 1) / bs
        let lastLength = min(bs, max(size, end) - last * bs)
        let from = slotOffset(first)
        try reserveSpace(offset: from, length: slotOffset(last) + lastLength + Int64(BlockLayout.overhead) - from)
    }
}
