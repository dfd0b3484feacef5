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
    /// for the same content: an untagged file asks the backing file; an encrypted file without
    /// the sparse flag is data to its end. In a sparse encrypted file (per block) and in a
    /// plain-tagged one (per 4 KiB page of its own offsets: the header shifts them against the
    /// backing file's pages) a unit is data when its stored bytes are not all zeros (a written
    /// block never is; holes read as zeros). A run of units wholly in allocated
    /// space is taken as data once its first two are (SEEK_HOLE does not read every unit of a
    /// long data run), and written zeros in a plain file may count as a hole; SEEK_DATA and
    /// SEEK_HOLE allow both.
    /// - Returns: a plaintext offset in `offset...size`.
    /// - Throws: `MAMError.system(errno: ENXIO)` for a negative offset, an offset at or past
    ///   the end, and SEEK_DATA with no data after `offset`; other errnos of the backing lseek
    ///   and pread.
    public func seek(_ target: SeekTarget, from offset: Int64) throws -> Int64 {
        let size = try plaintextSize()
        guard offset >= 0, offset < size else { throw MAMError.system("seek", errno: ENXIO) }
        let whence = target == .data ? SystemConstants.seekData : SystemConstants.seekHole
        let bs = Int64(BlockLayout.plaintextBlockSize)
        guard let header, dataOffset > 0 else {
            guard let position = try backingSeek(whence, from: offset) else { throw MAMError.system("seek", errno: ENXIO) }
            return min(size, max(offset, position))
        }
        let units = ProtectedFileContent.blockCount(size)
        if !header.isEncrypted {
            return try scan(target, from: offset, size: size, unitSize: bs, units: units, storedEnd: dataOffset + size) { bytes in
                bytes.allSatisfy { $0 == 0 }
            }
        }
        guard header.isSparse else { return target == .data ? offset : size }
        return try scan(target, from: offset, size: size, unitSize: Int64(BlockLayout.storedBlockSize), units: units,
                        storedEnd: storedSize(plaintextSize: size)) { isHole($0) }
    }

    /// SEEK_DATA / SEEK_HOLE over `units` units of the file's stored bytes, unit i at
    /// `dataOffset + i * unitSize` (the last one ends at `storedEnd`), each holding
    /// `plaintextBlockSize` bytes of the file; `isUnwritten` tells a unit's stored bytes that
    /// were never written (zeros) from written ones.
    private func scan(_ target: SeekTarget, from offset: Int64, size: Int64, unitSize: Int64, units: Int64, storedEnd: Int64,
                      isUnwritten: (UnsafeRawBufferPointer) -> Bool) throws -> Int64 {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let reader = UnitReader(fd)
        func start(of index: Int64) -> Int64 { dataOffset + index * unitSize }
        func end(of index: Int64) -> Int64 { index == units - 1 ? storedEnd : start(of: index + 1) }
        func unit(at stored: Int64) -> Int64 { (stored - dataOffset) / unitSize }
        func isWritten(_ index: Int64) throws -> Bool {
            try reader.isWritten(start(of: index)..<end(of: index), isUnwritten: isUnwritten)
        }
        let first = offset / bs
        switch target {
        case .data:
            // Units before the first backing data are holes; the unit that data falls in may be
            // an unwritten one sharing a backing block with the next one's first bytes.
            var from = start(of: first)
            while true {
                guard let data = try backingSeek(SystemConstants.seekData, from: from), data < storedEnd else {
                    throw MAMError.system("seek", errno: ENXIO)
                }
                let candidate = max(first, unit(at: data))
                if try isWritten(candidate) { return max(offset, candidate * bs) }
                guard candidate + 1 < units else { throw MAMError.system("seek", errno: ENXIO) }
                from = start(of: candidate + 1)
            }
        case .hole:
            var candidate = first
            while candidate < units {
                if try !isWritten(candidate) { return max(offset, candidate * bs) }
                // The next unit may be an unwritten one between written neighbours (all its
                // stored bytes allocated, all zeros); past it, jump to the next backing hole.
                let next = candidate + 1
                guard next < units else { return size }
                if try !isWritten(next) { return next * bs }
                guard let hole = try backingSeek(SystemConstants.seekHole, from: start(of: next)), hole < storedEnd else {
                    return size
                }
                candidate = max(next + 1, unit(at: hole))
            }
            return size
        }
    }

    /// Reads the stored bytes of units for a scan without leaving them in the page cache: the
    /// backing filesystem's own SEEK_HOLE takes cached pages of allocated, never-written space
    /// (fallocate's unwritten extents) for data, so a scan that read them through the cache
    /// (and the readahead around them) would move the answer of the next seek. Reads go
    /// through a second descriptor with O_DIRECT (aligned, cache-bypassing; dirty pages of
    /// the range are written back first by the kernel); where the backing filesystem or the
    /// file's mode refuses it, through the file's descriptor with the pages dropped again
    /// (POSIX_FADV_DONTNEED).
    private final class UnitReader {
        static let alignment = 4096
        let fd: Int32
        /// The O_DIRECT descriptor, or -1.
        let direct: Int32

        init(_ fd: Int32) {
            self.fd = fd
            direct = (try? FileDescriptor.reopen(fd, O_RDONLY | SystemConstants.directIO | O_CLOEXEC))?.take() ?? -1
        }

        deinit { if direct >= 0 { SystemCall.close(direct) } }

        /// Whether the stored bytes in `range` were written: `isUnwritten` does not take them
        /// for never-written ones (zeros, read from a backing hole or from allocated space next
        /// to a written unit that shares a backing block with it).
        func isWritten(_ range: Range<Int64>, isUnwritten: (UnsafeRawBufferPointer) -> Bool) throws -> Bool {
            if direct >= 0 {
                let align = Int64(Self.alignment)
                let lower = range.lowerBound / align * align
                let upper = (range.upperBound + align - 1) / align * align
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(upper - lower), alignment: Self.alignment)
                defer { buffer.deallocate() }
                // One aligned read: a direct read ends short only at the end of the file.
                let read = Glibc.pread(direct, buffer.baseAddress, buffer.count, off_t(lower))
                if read >= 0 {
                    let from = Int(range.lowerBound - lower)
                    let to = max(from, min(read, Int(range.upperBound - lower)))
                    return !isUnwritten(UnsafeRawBufferPointer(rebasing: buffer[from..<to]))
                }
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(range.count), alignment: 16)
            defer { buffer.deallocate() }
            let read = try FileIO.preadFully(fd, buffer, at: range.lowerBound)
            let written = !isUnwritten(UnsafeRawBufferPointer(rebasing: buffer[0..<read]))
            if !written { _ = posix_fadvise(fd, off_t(range.lowerBound), off_t(range.count), POSIX_FADV_DONTNEED) }
            return written
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
