import COpenSSL
import Foundation
import MAMSystem

/// Random-access plaintext view of one backing file: untagged, tagged-plain or encrypted.
///
/// Offsets and sizes in the API are plaintext bytes; the backing (stored) layout is described
/// in docs/FORMAT.md. Reads and writes touch only the 4 KiB blocks they cover (plus the old
/// last block when a write starts past the end). The object is not synchronised: callers
/// (the mount's per-inode content lock, the CLI) serialise writers against everything else.
/// Concurrent `read` calls are safe.
///
/// Holes: an encrypted file with the sparse header flag stores a block never written as
/// zero bytes (docs/FORMAT.md, "Holes"). Growing a file past whole blocks (truncate, a write
/// past the end), punching and zeroing store holes when the file is sparse already or when a
/// `SparseHeaderSource` can set the flag (rewrapping needs the account key); without either
/// they store encrypted zeros, as before the flag existed.
public final class ProtectedFileContent: @unchecked Sendable {
    /// Makes the sparse version of an encrypted header (same owner, key id, file id and file
    /// key; the flag set and the file key wrapped again under the account key), e.g.
    /// `ProtectionContext.sparseHeader(for:)`.
    public typealias SparseHeaderSource = @Sendable (ProtectedFileHeader) throws -> ProtectedFileHeader

    /// The backing file descriptor (opened read-write for writing; not owned, not closed here).
    public let fd: Int32
    /// The file's header; nil for an untagged file. Changes only when the file gets its first
    /// hole (the sparse flag is set): callers that cache the header read it back after writing.
    public internal(set) var header: ProtectedFileHeader? {
        didSet { shape = Shape(header) }
    }
    /// What the stored layout takes from `header`, kept as plain values: every request asks
    /// for the body's offset several times, and each read of `header` retains and releases
    /// its owner string and arrays.
    public private(set) var shape: Shape
    let fileKey: SymmetricKey?
    /// Where the sparse header comes from; nil: holes only in files that are sparse already.
    let sparseHeaderSource: SparseHeaderSource?
    /// Blocks encrypted per backing write: bounds memory per call.
    static let blocksPerChunk = 64

    /// - Parameters:
    ///   - fd: open backing file.
    ///   - header: parsed header, or nil when untagged.
    ///   - fileKey: the unwrapped file key; required exactly when `header` is encrypted.
    ///   - sparseHeader: how the header gets the sparse flag when the file gets its first hole
    ///     (nil: a file without the flag grows and is zeroed with encrypted zeros instead).
    /// - Throws: `MAMError.invalidArguments` when the key does not match the header kind.
    public init(fd: Int32, header: ProtectedFileHeader?, fileKey: SymmetricKey?, sparseHeader: SparseHeaderSource? = nil) throws {
        guard (header?.isEncrypted ?? false) == (fileKey != nil) else {
            throw MAMError.invalidArguments("a file key is needed exactly for encrypted files")
        }
        self.fd = fd
        self.header = header
        self.shape = Shape(header)
        self.fileKey = fileKey
        self.sparseHeaderSource = sparseHeader
    }

    /// Byte offset of the body in the backing file (the header length, 0 when untagged).
    public var dataOffset: Int64 { shape.dataOffset }

    /// Plaintext size of this file's backing file at `storedSize` bytes
    /// (`plaintextSize(storedSize:header:)` with the file's header).
    /// - Throws: `MAMError.authenticationFailed` when the stored size is impossible for the format.
    public func plaintextSize(storedSize: Int64) throws -> Int64 {
        try ProtectedFileContent.plaintextSize(storedSize: storedSize, headerLength: shape.headerLength, isEncrypted: shape.isEncrypted)
    }

    /// Backing size of this file with `plaintextSize` bytes of content
    /// (`storedSize(plaintextSize:header:)` with the file's header).
    func storedSize(plaintextSize: Int64) -> Int64 {
        ProtectedFileContent.checkedStoredSize(plaintextSize: max(0, plaintextSize), headerLength: shape.headerLength,
                                               isEncrypted: shape.isEncrypted) ?? .max
    }

    /// Plaintext size of a backing file of `storedSize` bytes with `header`.
    /// - Throws: `MAMError.authenticationFailed` when the stored size is impossible for the format.
    public static func plaintextSize(storedSize: Int64, header: ProtectedFileHeader?) throws -> Int64 {
        try plaintextSize(storedSize: storedSize, summary: header?.summary)
    }

    /// `plaintextSize(storedSize:header:)` from what the size depends on: the header's length
    /// and whether the body is encrypted (nil: untagged).
    public static func plaintextSize(storedSize: Int64, summary header: HeaderSummary?) throws -> Int64 {
        try plaintextSize(storedSize: storedSize, headerLength: header.map { Int64($0.length) }, isEncrypted: header?.isEncrypted ?? false)
    }

    /// `plaintextSize(storedSize:summary:)` from the header's length in bytes (nil: untagged)
    /// and whether the body is encrypted.
    static func plaintextSize(storedSize: Int64, headerLength: Int64?, isEncrypted: Bool) throws -> Int64 {
        guard let headerLength else { return storedSize }
        let body = storedSize - headerLength
        if body < 0 {
            // An empty backing file has no body yet; one cut inside an encrypted header is damaged.
            guard storedSize == 0 || !isEncrypted else {
                throw MAMError.authenticationFailed("stored size \(storedSize) ends inside the header")
            }
            return 0
        }
        guard isEncrypted else { return body }
        guard let size = BlockLayout.plaintextSize(bodyLength: body) else {
            throw MAMError.authenticationFailed("stored size \(storedSize) is not a valid encrypted length (truncated or corrupt)")
        }
        return size
    }

    /// The plaintext size a reader is shown for a backing file of `storedSize` bytes (header
    /// included) under `header` (nil: an untagged file, shown as stored). Unlike
    /// `plaintextSize(storedSize:header:)` it never fails: a body cut short by someone else
    /// (a torn tail: a last block of 1...28 stored bytes, or a file ending inside its
    /// header) shows the plaintext of the whole blocks before the cut, plus what a longer
    /// last stored piece still holds beyond its nonce and tag. Reading that tail fails its
    /// authentication; the size only says how far a reader may try.
    /// - Returns: plaintext bytes, 0...plaintextSize of the longest valid body within the file.
    public static func visiblePlaintextSize(storedSize: Int64, header: ProtectedFileHeader?) -> Int64 {
        visiblePlaintextSize(storedSize: storedSize, summary: header?.summary)
    }

    /// `visiblePlaintextSize(storedSize:header:)` from the header's `HeaderSummary`.
    public static func visiblePlaintextSize(storedSize: Int64, summary header: HeaderSummary?) -> Int64 {
        if let exact = try? plaintextSize(storedSize: storedSize, summary: header) { return exact }
        let body = max(0, storedSize - Int64(header?.length ?? 0))
        return BlockLayout.largestPlaintextSize(bodyLength: body)
    }

    /// Backing size of a file with `plaintextSize` bytes of content under `header` (a size past
    /// `maximumPlaintextSize(header:)` answers Int64.max; see `checkedStoredSize`).
    public static func storedSize(plaintextSize: Int64, header: ProtectedFileHeader?) -> Int64 {
        checkedStoredSize(plaintextSize: max(0, plaintextSize), header: header) ?? .max
    }

    /// Current plaintext size (from the backing size, without reading the body).
    public func plaintextSize() throws -> Int64 {
        try plaintextSize(storedSize: try FileIO.size(fd))
    }

    /// Writes the header at offset 0 when the backing file does not hold it yet.
    ///
    /// - Parameter reserve: reserve the space first (fallocate), so a full disk leaves no
    ///   partial header; false for a file just created, which the caller removes on failure.
    public func writeHeaderIfMissing(reserve: Bool = true) throws {
        _ = try writeHeaderIfMissing(storedSize: try FileIO.size(fd), reserve: reserve)
    }

    /// `writeHeaderIfMissing(reserve:)` for a backing file of `storedSize` bytes (the caller's
    /// fstat). - Returns: the backing size afterwards.
    func writeHeaderIfMissing(storedSize: Int64, reserve: Bool = true) throws -> Int64 {
        guard let header, storedSize < Int64(header.length) else { return storedSize }
        let bytes = header.encoded()
        if reserve { try reserveSpace(offset: 0, length: Int64(bytes.count), sizeBefore: storedSize) }
        try bytes.withUnsafeBytes { try FileIO.pwriteFully(fd, $0, at: 0) }
        HeaderHint.store(header, fd: fd)
        return max(storedSize, Int64(bytes.count))
    }

    // MARK: Reading

    /// Reads up to `buffer.count` plaintext bytes at `offset`.
    /// - Parameter storedSize: the backing file's size from the caller's fstat just before,
    ///   under the same content lock (one fstat less), or nil.
    /// - Returns: bytes read (0 at or past end of file).
    /// - Throws: `MAMError.authenticationFailed` when any covered block fails authentication
    ///   (no partial plaintext is returned); `.system` on I/O errors.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, storedSize: Int64? = nil) throws -> Int {
        guard offset >= 0 else { throw MAMError.system("read", errno: EINVAL) }
        guard buffer.count > 0 else { return 0 }
        let size: Int64
        if let storedSize { size = try plaintextSize(storedSize: storedSize) } else { size = try plaintextSize() }
        guard let header, let fileId = header.encryption?.fileId, let fileKey else {
            guard offset < size else { return 0 }
            let count = Int(min(Int64(buffer.count), size - offset))
            return try FileIO.preadFully(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: dataOffset + offset)
        }
        guard offset < size else { return 0 }
        let end = offset + min(Int64(buffer.count), size - offset)
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let firstBlock = offset / bs
        let lastBlock = (end - 1) / bs
        let cipher = try BlockCipher.take(key: fileKey, fileId: fileId)
        defer { BlockCipher.keep(cipher, with: fileKey) }
        // Partial blocks are opened into the cipher's staging block (wiped by `keep`).
        // One stored-bytes buffer for the whole call, sized to what it covers.
        let chunkBlocks = min(Int64(ProtectedFileContent.blocksPerChunk), lastBlock - firstBlock + 1)
        try cipher.withStoredBuffer(blocks: Int(chunkBlocks)) { storedBuffer in
            var block = firstBlock
            while block <= lastBlock {
                let chunkEnd = min(lastBlock, block + chunkBlocks - 1)
                let stored = try readStoredBlocks(from: block, through: chunkEnd, plaintextSize: size, into: storedBuffer)
                var b = block
                while b <= chunkEnd {
                    let blockStart = b * bs
                    let plainLength = Int(min(bs, size - blockStart))
                    let storedOffset = Int(b - block) * BlockLayout.storedBlockSize
                    let storedBlock = UnsafeRawBufferPointer(start: stored.baseAddress! + storedOffset, count: plainLength + BlockLayout.overhead)
                    let copyFrom = max(offset, blockStart)
                    let copyTo = min(end, blockStart + Int64(plainLength))
                    let wholeBlock = copyFrom == blockStart && copyTo == blockStart + Int64(plainLength)
                    if wholeBlock {
                        try openBlock(cipher, index: b, stored: storedBlock, into: buffer.baseAddress! + Int(blockStart - offset))
                    } else {
                        let staging = cipher.staging(plainLength)
                        try openBlock(cipher, index: b, stored: storedBlock, into: staging)
                        (buffer.baseAddress! + Int(copyFrom - offset)).copyMemory(
                            from: staging + Int(copyFrom - blockStart), byteCount: Int(copyTo - copyFrom))
                    }
                    b += 1
                }
                block = chunkEnd + 1
            }
        }
        return Int(end - offset)
    }

    /// Stored length of blocks first...last (inclusive), which must exist for `plaintextSize`.
    static func storedLength(from first: Int64, through last: Int64, plaintextSize size: Int64) -> Int {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let lastPlain = min(bs, size - last * bs)
        return Int(last - first) * BlockLayout.storedBlockSize + Int(lastPlain) + BlockLayout.overhead
    }

    /// Reads the stored bytes of blocks first...last (inclusive) into a new buffer the caller deallocates.
    func readStoredBlocks(from first: Int64, through last: Int64, plaintextSize size: Int64) throws -> UnsafeMutableRawBufferPointer {
        let length = ProtectedFileContent.storedLength(from: first, through: last, plaintextSize: size)
        let stored = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 16)
        do {
            _ = try readStoredBlocks(from: first, through: last, plaintextSize: size, into: stored)
        } catch {
            stored.deallocate()
            throw error
        }
        return stored
    }

    /// Reads the stored bytes of blocks first...last (inclusive) into the start of `buffer`
    /// (large enough for them) and returns that part of it.
    func readStoredBlocks(from first: Int64, through last: Int64, plaintextSize size: Int64,
                          into buffer: UnsafeMutableRawBufferPointer) throws -> UnsafeMutableRawBufferPointer {
        let length = ProtectedFileContent.storedLength(from: first, through: last, plaintextSize: size)
        let stored = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
        let got = try FileIO.preadFully(fd, stored, at: dataOffset + first * Int64(BlockLayout.storedBlockSize))
        guard got == length else {
            throw MAMError.authenticationFailed("file shrank while reading block \(first)")
        }
        return stored
    }

    // MARK: Writing

    /// Writes `bytes` at plaintext `offset`, extending the file (with zeros in any gap) as needed.
    /// Space is reserved before any ciphertext is written, so ENOSPC leaves the file unchanged
    /// (and a failed reservation holds no blocks).
    /// - Throws: `MAMError.system` (EINVAL for a negative offset, EFBIG past
    ///   `maximumPlaintextSize`, ENOSPC, EIO, ...), `.authenticationFailed` when a block that
    ///   must be merged with the new bytes does not authenticate.
    /// - Parameter statted: the backing file's fstat, taken by the caller just before under the
    ///   same content lock (one fstat less), or nil.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, backing statted: stat? = nil) throws {
        let plainEnd = try checkedEnd(offset: offset, count: Int64(bytes.count), "write")
        // One fstat serves the header check, the size and the reservation.
        let backing = try statted ?? FileIO.stat(fd)
        let storedSize = try writeHeaderIfMissing(storedSize: Int64(backing.st_size))
        guard bytes.count > 0 else { return }
        guard shape.isEncrypted else {
            // A write that fails part-way (ENOSPC) must not leave its first bytes behind: on
            // failure the file is cut back to its old size, and a write that also overwrites
            // bytes the file has reserves its new range first (so it fails before changing
            // any), from the first hole of the backing file inside it if there is one. A gap
            // before the write stays a hole, as on the backing filesystem.
            let oldSize = storedSize
            let end = dataOffset + plainEnd
            let start = dataOffset + offset
            let reserveFrom = firstBackingHole(from: start, before: min(end, oldSize)) ?? max(oldSize, start)
            if end > reserveFrom, start < oldSize {
                try reserveSpace(offset: reserveFrom, length: end - reserveFrom, sizeBefore: oldSize)
            }
            do {
                try FileIO.pwriteFully(fd, bytes, at: dataOffset + offset)
            } catch {
                if end > oldSize { _ = ftruncate(fd, off_t(oldSize)) }
                throw error
            }
            return
        }
        let size = try plaintextSize(storedSize: storedSize)
        if canStoreHoles, offset / Int64(BlockLayout.plaintextBlockSize) > ProtectedFileContent.blockCount(size) {
            try writeAfterHoles(bytes, at: offset, end: plainEnd, size: size)
            return
        }
        try writeEncrypted(offset: offset, source: bytes, size: size, blockSize: Int64(backing.st_blksize))
    }

    /// Sets the plaintext size. Shrinking re-encrypts the new last partial block (a hole stays
    /// a hole); growing an encrypted file stores holes past its old last block when it can
    /// (see the type's note on holes), else encrypted zeros. The unchanged size frees blocks
    /// reserved past the end, as ext4 does.
    /// - Throws: `MAMError.system` with EINVAL (negative size), EFBIG (past
    ///   `maximumPlaintextSize`), ENOSPC (nothing changed then), EIO.
    public func truncate(to newSize: Int64) throws {
        _ = try checkedEnd(offset: newSize, count: 0, "truncate")
        try writeHeaderIfMissing()
        guard let header, header.isEncrypted, let fileId = header.encryption?.fileId, let fileKey else {
            guard ftruncate(fd, off_t(dataOffset + newSize)) == 0 else { throw MAMError.fromErrno("truncate") }
            return
        }
        let size = try plaintextSize()
        if newSize > size {
            try grow(from: size, to: newSize)
            return
        }
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let keep = Int(newSize % bs)
        if keep > 0 && newSize < size {
            let index = newSize / bs
            let cipher = try BlockCipher.take(key: fileKey, fileId: fileId)
            defer { BlockCipher.keep(cipher, with: fileKey) }
            let stored = try readStoredBlocks(from: index, through: index, plaintextSize: size)
            defer { stored.deallocate() }
            // A hole cut shorter is still all zeros: still a hole.
            if isHole(UnsafeRawBufferPointer(stored)) {
                guard ftruncate(fd, off_t(storedSize(plaintextSize: newSize))) == 0 else {
                    throw MAMError.fromErrno("truncate")
                }
                return
            }
            let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.plaintextBlockSize, alignment: 16)
            defer { SecureWipe.bytes(plain.baseAddress, count: plain.count); plain.deallocate() }
            try cipher.open(index: index, stored: UnsafeRawBufferPointer(stored), into: plain.baseAddress!)
            let newStored = UnsafeMutableRawBufferPointer.allocate(byteCount: keep + BlockLayout.overhead, alignment: 16)
            defer { newStored.deallocate() }
            try cipher.seal(index: index, plaintext: UnsafeRawBufferPointer(rebasing: plain[0..<keep]), into: newStored.baseAddress!)
            // Cut the later blocks first, then replace the block, then cut its old tail.
            let blockOffset = dataOffset + index * Int64(BlockLayout.storedBlockSize)
            guard ftruncate(fd, off_t(blockOffset + Int64(stored.count))) == 0 else { throw MAMError.fromErrno("truncate") }
            try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(newStored), at: blockOffset)
        }
        guard ftruncate(fd, off_t(storedSize(plaintextSize: newSize))) == 0 else {
            throw MAMError.fromErrno("truncate")
        }
    }

    /// Encrypts and writes `source` (nil: nothing, only the zero fill) at plaintext `offset`,
    /// zero-filling any gap between the current end and `offset`.
    ///
    /// Hot path of every encrypted write (FUSE writes, the CLI's 1 MiB chunks): a block the
    /// source covers whole is sealed straight from the caller's buffer; only partial blocks go
    /// through a staging block (old plaintext merged, the rest zeroed). A full disk fails a call
    /// before it changed a stored byte: one that only adds blocks past the stored end, or
    /// rewrites only the old last partial block of a file without holes (its bytes past the
    /// end written first), reserves nothing and, when it fails part-way, cuts the file back to
    /// its old end; one whose new bytes fit in the filesystem block holding the file's last
    /// byte needs nothing; any other that extends the file reserves the new part of its stored
    /// range once, before any ciphertext is written. In a sparse file, a range that meets a
    /// hole of the backing file is reserved from that hole on (new space though the file does
    /// not grow).
    ///
    /// The caller has checked `offset` + the source's count against `maximumPlaintextSize`, so
    /// every stored offset below fits in off_t. `size`: the current plaintext size when the
    /// caller has it (one fstat less on the write path). `blockSize`: the backing file's
    /// st_blksize, when `size` comes from the caller's fstat just now; it lets an append that
    /// stays inside the filesystem block holding the file's last byte skip the reservation
    /// (`tailBlockHolds`).
    func writeEncrypted(offset: Int64, source: UnsafeRawBufferPointer?, size knownSize: Int64? = nil,
                        blockSize: Int64? = nil) throws {
        guard let fileId = header?.encryption?.fileId, let fileKey else { return }
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let size = try knownSize ?? plaintextSize()
        let count = Int64(source?.count ?? 0)
        let end = offset + count
        let newSize = max(size, end)
        let start = min(offset, size)
        guard newSize > start else { return }
        let firstBlock = start / bs
        // Blocks past the written range stay as they are.
        let lastTouched = min((newSize - 1) / bs, max(end - 1, start) / bs)
        let lastLength = Int(min(bs, newSize - lastTouched * bs))
        let rangeStart = dataOffset + firstBlock * Int64(BlockLayout.storedBlockSize)
        let rangeLength = (lastTouched - firstBlock) * Int64(BlockLayout.storedBlockSize) + Int64(lastLength + BlockLayout.overhead)
        // Only the part past the current end needs new space: blocks inside the file are
        // rewritten where they are (an fallocate over them still cost a journal handle per
        // 4 KiB random write).
        let storedEnd = storedSize(plaintextSize: size)
        let reserveFrom = max(rangeStart, storedEnd)
        let reserveEnd = rangeStart + rangeLength
        // The backing size to cut back to when the write fails before it overwrote a stored byte.
        var appendedOnto: Int64?
        // Where the stored bytes past the old end begin, when they are written before the rest.
        var newBytesFirst: Int64?
        // Where the filesystem block holding the file's last byte begins, when the bytes the
        // write merges tell whether that block is data (`sealAndWrite`).
        var tailProbe: Int64?
        // The write rewrites only the old last partial block (stored without holes, so its
        // bytes are allocated) and adds bytes past it.
        let lastBlockOnly = reserveEnd > storedEnd && storedEnd - rangeStart < Int64(BlockLayout.storedBlockSize) && !shape.isSparse
        if rangeStart >= storedEnd {
            // Nothing stored is overwritten (the first write of a new file, an append after a
            // whole last block): no reservation, a failure part-way is undone by cutting the
            // file back to its old end (as the filesystem itself reports a short write).
            appendedOnto = blockSize == nil ? try FileIO.size(fd) : storedEnd
        } else if shape.isSparse, let hole = firstBackingHole(from: rangeStart, before: min(reserveEnd, storedEnd)) {
            // Blocks of a sparse file that lie in a hole of the backing file (only a sparse
            // file has any inside its stored range): a sealed block written there part-way
            // would no longer authenticate. Reserved first, from the first hole on.
            try reserveSpace(offset: hole, length: reserveEnd - hole, sizeBefore: blockSize == nil ? nil : storedEnd)
        } else if lastBlockOnly, offset > firstBlock * bs, let blockSize, reserveFrom == storedEnd,
                  let probe = tailBlockStart(storedEnd: storedEnd, end: reserveEnd, blockSize: blockSize) {
            // An append into the filesystem block holding the file's last byte, merging the old
            // last block: the bytes that merge reads decide, without an lseek, between one
            // write (that block is data: nothing new to allocate) and the new bytes first (as
            // in the next case).
            appendedOnto = storedEnd
            newBytesFirst = storedEnd
            tailProbe = probe
        } else if let blockSize, reserveFrom == storedEnd, tailBlockHolds(storedEnd: storedEnd, end: reserveEnd, blockSize: blockSize) {
            // Nothing new to allocate: the new bytes land in a block the file has already.
        } else if lastBlockOnly {
            // An append that rewrites only the old last partial block (stored without holes,
            // so its bytes are allocated): the bytes past the old end are written first, and
            // only once they are all there is the old block overwritten. A full disk fails the
            // first part, which cutting the file back undoes; no reservation is needed.
            appendedOnto = blockSize == nil ? try FileIO.size(fd) : storedEnd
            newBytesFirst = storedEnd
        } else {
            try reserveSpace(offset: reserveFrom, length: reserveEnd - reserveFrom, sizeBefore: blockSize == nil ? nil : storedEnd)
        }
        do {
            try sealAndWrite(fileId: fileId, fileKey: fileKey, offset: offset, source: source, size: size, newSize: newSize,
                             firstBlock: firstBlock, lastTouched: lastTouched, newBytesFirst: newBytesFirst, tailProbe: tailProbe)
        } catch {
            if let appendedOnto { releaseSpace(pastStoredSize: appendedOnto) }
            throw error
        }
    }

    /// The block loop of `writeEncrypted`: seals blocks `firstBlock...lastTouched` of the file
    /// growing from `size` to `newSize` plaintext bytes, merged with `source` at `offset`,
    /// and writes them a chunk at a time. A chunk that spans backing offset `newBytesFirst`
    /// is written in two parts, the bytes from that offset on first; unless `tailProbe` is set
    /// (the start of the filesystem block holding the old last stored byte) and the old last
    /// block merged here has bytes in that filesystem block that are not all zero: it is data
    /// then (a hole or an unwritten extent reads as zeros), so the write needs no new space.
    private func sealAndWrite(fileId: [UInt8], fileKey: SymmetricKey, offset: Int64, source: UnsafeRawBufferPointer?,
                              size: Int64, newSize: Int64, firstBlock: Int64, lastTouched: Int64,
                              newBytesFirst: Int64?, tailProbe: Int64?) throws {
        var newBytesFirst = newBytesFirst
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let end = offset + Int64(source?.count ?? 0)
        let cipher = try BlockCipher.take(key: fileKey, fileId: fileId)
        defer { BlockCipher.keep(cipher, with: fileKey) }
        // Partial blocks are merged in the cipher's staging block (wiped by `keep`).
        let chunkBlocks = min(Int64(ProtectedFileContent.blocksPerChunk), lastTouched - firstBlock + 1)
        try cipher.withStoredBuffer(blocks: Int(chunkBlocks)) { stored in
            var block = firstBlock
            while block <= lastTouched {
                let chunkEnd = min(lastTouched, block + chunkBlocks - 1)
                try cipher.expectBlocks(Int(chunkEnd - block + 1))
                var storedLength = 0
                var b = block
                while b <= chunkEnd {
                    let blockStart = b * bs
                    let oldLength = Int(max(0, min(bs, size - blockStart)))
                    let newLength = Int(min(bs, newSize - blockStart))
                    let dataFrom = max(offset, blockStart)
                    let dataTo = min(end, blockStart + Int64(newLength))
                    let blockPlain: UnsafeRawBufferPointer
                    var rememberAfterSeal = false
                    if let source, dataFrom == blockStart, dataTo == blockStart + Int64(newLength) {
                        blockPlain = UnsafeRawBufferPointer(start: source.baseAddress! + Int(blockStart - offset), count: newLength)
                    } else {
                        let plain = cipher.staging(newLength)
                        var zeroFrom = 0
                        var merged = false
                        if oldLength > 0 && !(dataFrom <= blockStart && dataTo >= blockStart + Int64(oldLength)) {
                            // The old stored bytes are read into the place the block's new ones
                            // go (not written yet), opened, and then overwritten by the seal.
                            let slot = UnsafeMutableRawBufferPointer(start: stored.baseAddress! + storedLength,
                                                                     count: BlockLayout.storedBlockSize)
                            let oldStored = UnsafeRawBufferPointer(try readStoredBlocks(from: b, through: b, plaintextSize: size, into: slot))
                            if let tailProbe, newBytesFirst != nil, oldLength < Int(bs), hasData(oldStored, from: tailProbe,
                                                                                                storedOffset: dataOffset + b * Int64(BlockLayout.storedBlockSize)) {
                                newBytesFirst = nil
                            }
                            if !cipher.recallSealed(index: b, stored: oldStored, into: plain) {
                                try openBlock(cipher, index: b, stored: oldStored, into: plain)
                            }
                            zeroFrom = oldLength
                            merged = true
                        }
                        if newLength > zeroFrom {
                            (plain + zeroFrom).initializeMemory(as: UInt8.self, repeating: 0, count: newLength - zeroFrom)
                        }
                        if let source, dataTo > dataFrom {
                            (plain + Int(dataFrom - blockStart)).copyMemory(
                                from: source.baseAddress! + Int(dataFrom - offset), byteCount: Int(dataTo - dataFrom))
                        }
                        blockPlain = UnsafeRawBufferPointer(start: plain, count: newLength)
                        rememberAfterSeal = merged && newLength < Int(bs)
                    }
                    try cipher.seal(index: b, plaintext: blockPlain, into: stored.baseAddress! + storedLength)
                    if rememberAfterSeal {
                        // The file's last block, merged: the next append merges into it again.
                        cipher.rememberSealed(index: b, plaintext: blockPlain, stored: UnsafeRawBufferPointer(
                            start: stored.baseAddress! + storedLength, count: newLength + BlockLayout.overhead))
                    }
                    storedLength += newLength + BlockLayout.overhead
                    b += 1
                }
                let storedOffset = dataOffset + block * Int64(BlockLayout.storedBlockSize)
                if let split = newBytesFirst, split > storedOffset, split < storedOffset + Int64(storedLength) {
                    let head = Int(split - storedOffset)
                    try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(rebasing: stored[head..<storedLength]), at: split)
                    try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(rebasing: stored[0..<head]), at: storedOffset)
                } else {
                    try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(rebasing: stored[0..<storedLength]), at: storedOffset)
                }
                block = chunkEnd + 1
            }
        }
    }

    /// The first backing offset in `from..<before` that lies in a hole of the backing file
    /// (lseek SEEK_HOLE; unwritten reservations count as holes on some filesystems, which
    /// costs only a needless reservation), or nil when there is none. A write into a hole
    /// needs new space though the file does not grow, so on a full disk it can fail part of
    /// the way through. A failing lseek answers `from`: the caller reserves rather than
    /// risks a torn write.
    func firstBackingHole(from: Int64, before: Int64) -> Int64? {
        guard from < before else { return nil }
        let hole = lseek(fd, off_t(from), SystemConstants.seekHole)
        guard hole >= 0 else { return from }
        return Int64(hole) < before ? max(from, Int64(hole)) : nil
    }

    /// The backing offset where the filesystem block (`blockSize`, st_blksize) holding the
    /// file's last byte begins, when backing bytes `storedEnd..<end` past the current end
    /// `storedEnd` all lie in it; nil for an empty file or a range reaching the next block.
    func tailBlockStart(storedEnd: Int64, end: Int64, blockSize: Int64) -> Int64? {
        guard storedEnd > 0, blockSize > 0, end > storedEnd else { return nil }
        let lastByte = storedEnd - 1
        guard (end - 1) / blockSize == lastByte / blockSize else { return nil }
        return lastByte / blockSize * blockSize
    }

    /// Whether `stored`, the bytes read at backing offset `storedOffset`, has a byte that is
    /// not zero at or past backing offset `from` (scanned from the end: a block's tag is there).
    func hasData(_ stored: UnsafeRawBufferPointer, from: Int64, storedOffset: Int64) -> Bool {
        let first = Int(max(0, from - storedOffset))
        var i = stored.count
        while i > first {
            i -= 1
            if stored[i] != 0 { return true }
        }
        return false
    }

    /// Whether backing bytes `storedEnd..<end` (past the current end `storedEnd`) need no new
    /// space: they lie in the filesystem block (`blockSize`, st_blksize) that holds the file's
    /// last byte, and that byte is data (lseek SEEK_DATA stops on it: the block is allocated,
    /// or reserved by delayed allocation). A hole there, an empty file or a range reaching
    /// into the next block needs a reservation. Appends of a few hundred bytes (`dd bs=512`)
    /// skip a fallocate (a journal handle on ext4) seven times out of eight this way.
    func tailBlockHolds(storedEnd: Int64, end: Int64, blockSize: Int64) -> Bool {
        guard tailBlockStart(storedEnd: storedEnd, end: end, blockSize: blockSize) != nil else { return false }
        return lseek(fd, off_t(storedEnd - 1), SystemConstants.seekData) == off_t(storedEnd - 1)
    }
}
