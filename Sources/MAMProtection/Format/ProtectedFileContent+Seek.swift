import Foundation
import MAMSystem

/// lseek(2) SEEK_DATA and SEEK_HOLE on plaintext offsets.
extension ProtectedFileContent {
    /// What a seek looks for.
    public enum SeekTarget: Sendable {
        /// SEEK_DATA: the first offset at or after the start that holds data.
        case data
        /// SEEK_HOLE: the first offset at or after the start in a hole (the end of the file counts).
        case hole
    }

    /// The plaintext offset SEEK_DATA / SEEK_HOLE answers from plaintext `offset`, as ext4 does
    /// for the same content: an untagged or plain-tagged file asks the backing file (shifted by
    /// the header); an encrypted file without the sparse flag is data to its end; a sparse one
    /// reports as holes the blocks whose whole stored bytes lie in a hole of the backing file
    /// (block granular: a hole block that is allocated, or shares a backing block with data,
    /// counts as data, which SEEK_DATA/SEEK_HOLE allow).
    /// - Returns: a plaintext offset in `offset...size`.
    /// - Throws: `MAMError.system(errno: ENXIO)` for a negative offset, an offset at or past
    ///   the end, and SEEK_DATA with no data after `offset`; other errnos of the backing lseek.
    public func seek(_ target: SeekTarget, from offset: Int64) throws -> Int64 {
        let size = try plaintextSize()
        guard offset >= 0, offset < size else { throw MAMError.system("seek", errno: ENXIO) }
        let whence = target == .data ? SystemConstants.seekData : SystemConstants.seekHole
        guard let header, header.isEncrypted else {
            guard let position = try backingSeek(whence, from: dataOffset + offset) else {
                throw MAMError.system("seek", errno: ENXIO)
            }
            return min(size, max(offset, position - dataOffset))
        }
        guard header.isSparse else { return target == .data ? offset : size }
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let slot = Int64(BlockLayout.storedBlockSize)
        let blocks = ProtectedFileContent.blockCount(size)
        let storedEnd = ProtectedFileContent.storedSize(plaintextSize: size, header: header)
        func block(at stored: Int64) -> Int64 { (stored - dataOffset) / slot }
        let start = offset / bs
        switch target {
        case .data:
            // Every block whose stored bytes lie before the first backing data is a hole.
            guard let data = try backingSeek(whence, from: slotOffset(start)), data < storedEnd else {
                throw MAMError.system("seek", errno: ENXIO)
            }
            return max(offset, block(at: data) * bs)
        case .hole:
            var from = slotOffset(start)
            while true {
                guard let hole = try backingSeek(SystemConstants.seekHole, from: from), hole < storedEnd else { return size }
                // The first block starting in that backing hole: a hole if no data follows
                // before its stored bytes end.
                let candidate = (hole - dataOffset + slot - 1) / slot
                guard candidate < blocks else { return size }
                let candidateEnd = candidate == blocks - 1 ? storedEnd : slotOffset(candidate + 1)
                let data = try backingSeek(SystemConstants.seekData, from: slotOffset(candidate)) ?? .max
                if data >= candidateEnd { return max(offset, candidate * bs) }
                from = data
            }
        }
    }

    /// lseek(2) of the backing descriptor; nil for ENXIO (nothing of the kind at or after `from`).
    private func backingSeek(_ whence: Int32, from: Int64) throws -> Int64? {
        let position = lseek(fd, off_t(from), whence)
        if position >= 0 { return Int64(position) }
        if errno == ENXIO { return nil }
        throw MAMError.fromErrno("seek")
    }
}
