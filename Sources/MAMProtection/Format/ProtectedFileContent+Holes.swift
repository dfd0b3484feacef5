import COpenSSL
import Foundation
import MAMSystem

/// Holes in encrypted files (docs/FORMAT.md, "Holes"): in a file whose header has the sparse
/// flag, a stored block of only zero bytes reads as that many zero plaintext bytes without
/// being decrypted. The flag is set, by rewrapping the header in place, before the first hole
/// is stored; a file that never had one keeps full integrity (an all-zero block fails its tag).
extension ProtectedFileContent {
    /// Whether this file may store holes: it is encrypted and sparse already, or its header
    /// can be made sparse (`sparseHeaderSource`).
    var canStoreHoles: Bool {
        guard shape.isEncrypted else { return false }
        return shape.isSparse || sparseHeaderSource != nil
    }

    /// Blocks of a file of `size` plaintext bytes (the last one may be partial).
    static func blockCount(_ size: Int64) -> Int64 {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        return size / bs + (size % bs > 0 ? 1 : 0)
    }

    /// Backing offset of block `index`'s stored bytes.
    func slotOffset(_ index: Int64) -> Int64 {
        dataOffset + index * Int64(BlockLayout.storedBlockSize)
    }

    /// Whether `stored` (one block's stored bytes) is a hole: all zeros in a sparse file.
    func isHole(_ stored: UnsafeRawBufferPointer) -> Bool {
        shape.isSparse && BlockLayout.isHole(stored)
    }

    /// Opens stored block `index` into `target` (`stored.count - overhead` bytes): a hole
    /// gives zeros; any other block must authenticate.
    /// - Throws: `MAMError.authenticationFailed` (`target` cleared).
    func openBlock(_ cipher: BlockCipher, index: Int64, stored: UnsafeRawBufferPointer, into target: UnsafeMutableRawPointer) throws {
        if isHole(stored) {
            target.initializeMemory(as: UInt8.self, repeating: 0, count: stored.count - BlockLayout.overhead)
            return
        }
        try cipher.open(index: index, stored: stored, into: target)
    }

    /// Sets the sparse flag of an encrypted header that lacks it: the header from
    /// `sparseHeaderSource` (same length, same file key) is written in place at offset 0 (one
    /// pwrite inside the first sector) and made durable before the caller stores any hole, so
    /// no crash leaves a hole behind a header without the flag.
    /// - Throws: `MAMError.internalError` when there is no source or it answers another header;
    ///   its own errors (keyUnavailable, ...); `.system` for the write or fdatasync.
    func markSparse() throws {
        guard let header, header.isEncrypted, !header.isSparse else { return }
        guard let sparseHeaderSource else { throw MAMError.internalError("no way to mark the file sparse") }
        let marked = try sparseHeaderSource(header)
        guard marked.isSparse, marked.length == header.length, marked.owner == header.owner,
              marked.encryption?.fileId == header.encryption?.fileId, marked.encryption?.keyId == header.encryption?.keyId else {
            throw MAMError.internalError("the sparse header does not match the file's header")
        }
        try marked.encoded().withUnsafeBytes { try FileIO.pwriteFully(fd, $0, at: 0) }
        while fdatasync(fd) != 0 {
            guard errno == EINTR else { throw MAMError.fromErrno("fdatasync") }
        }
        self.header = marked
    }

    /// Grows the file from `size` to `newSize` plaintext bytes: holes when it can store them
    /// and the growth passes the old last block, else encrypted zeros (`writeEncrypted`).
    func grow(from size: Int64, to newSize: Int64) throws {
        guard newSize > size else { return }
        if canStoreHoles, newSize > ProtectedFileContent.blockCount(size) * Int64(BlockLayout.plaintextBlockSize) {
            try growWithHoles(from: size, to: newSize)
        } else {
            try writeEncrypted(offset: newSize, source: nil, size: size)
        }
    }

    /// Grows the file from `size` to `newSize` (> size) plaintext bytes, every block after
    /// the old last one a hole: a partial old last block is sealed again at its new length (a
    /// hole stays one), then the backing file is extended with zeros. The regrown block's
    /// space is reserved first, so ENOSPC changes nothing; any later failure cuts the file
    /// back to `size`.
    func growWithHoles(from size: Int64, to newSize: Int64) throws {
        guard let fileId = header?.encryption?.fileId, let fileKey else { return }
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let last = size / bs
        let oldLength = Int(size % bs)
        let newLength = Int(min(bs, newSize - last * bs))
        if oldLength > 0 {
            try reserveSpace(offset: slotOffset(last) + Int64(oldLength + BlockLayout.overhead), length: Int64(newLength - oldLength))
        }
        do {
            if newSize > ProtectedFileContent.blockCount(size) * bs { try markSparse() }
            if oldLength > 0 {
                let stored = try readStoredBlocks(from: last, through: last, plaintextSize: size)
                defer { stored.deallocate() }
                if !isHole(UnsafeRawBufferPointer(stored)) {
                    let cipher = try BlockCipher.take(key: fileKey, fileId: fileId)
                    defer { BlockCipher.keep(cipher, with: fileKey) }
                    let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.plaintextBlockSize, alignment: 16)
                    defer { SecureWipe.bytes(plain.baseAddress, count: plain.count); plain.deallocate() }
                    try cipher.open(index: last, stored: UnsafeRawBufferPointer(stored), into: plain.baseAddress!)
                    (plain.baseAddress! + oldLength).initializeMemory(as: UInt8.self, repeating: 0, count: newLength - oldLength)
                    let sealed = UnsafeMutableRawBufferPointer.allocate(byteCount: newLength + BlockLayout.overhead, alignment: 16)
                    defer { sealed.deallocate() }
                    try cipher.seal(index: last, plaintext: UnsafeRawBufferPointer(rebasing: plain[0..<newLength]), into: sealed.baseAddress!)
                    try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(sealed), at: slotOffset(last))
                }
            }
            guard ftruncate(fd, off_t(storedSize(plaintextSize: newSize))) == 0 else {
                throw MAMError.fromErrno("truncate")
            }
        } catch {
            try? truncate(to: size)
            throw error
        }
    }

    /// A write at `offset` (..<`end`) that starts past the old last block of a file of `size`
    /// bytes: the stored range it writes is reserved, the file grows with holes up to the
    /// block the write starts in, and the write seals only the blocks it covers. ENOSPC at
    /// the reservation changes nothing; a failure after it cuts the file back to `size`.
    func writeAfterHoles(_ bytes: UnsafeRawBufferPointer, at offset: Int64, end: Int64, size: Int64) throws {
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let first = offset / bs
        let from = slotOffset(first)
        try reserveSpace(offset: from, length: storedSize(plaintextSize: end) - from)
        try growWithHoles(from: size, to: first * bs)
        do {
            try writeEncrypted(offset: offset, source: bytes)
        } catch {
            try? truncate(to: size)
            throw error
        }
    }

    /// Zeros plaintext `offset..<end` (cut at the end of the file) of an encrypted file: a
    /// block the range covers whole becomes a hole (its stored bytes punched out of the
    /// backing file, or with `keepAllocated` zeroed in place and left allocated), a block it
    /// covers in part is decrypted, zeroed there and sealed again (a hole stays one). A file
    /// that cannot store holes gets encrypted zeros instead. Same stored length throughout.
    /// - Throws: `.authenticationFailed` for an edge block that does not authenticate, `.system`.
    func zeroEncrypted(offset: Int64, end: Int64, keepAllocated: Bool) throws {
        guard let fileId = header?.encryption?.fileId, let fileKey else { return }
        let size = try plaintextSize()
        let stop = min(end, size)
        guard offset < stop else { return }
        let bs = Int64(BlockLayout.plaintextBlockSize)
        let first = offset / bs
        let last = (stop - 1) / bs
        func length(_ block: Int64) -> Int { Int(min(bs, size - block * bs)) }
        func coveredWhole(_ block: Int64) -> Bool { offset <= block * bs && stop >= block * bs + Int64(length(block)) }
        let cipher = try BlockCipher.take(key: fileKey, fileId: fileId)
        defer { BlockCipher.keep(cipher, with: fileKey) }
        let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.plaintextBlockSize, alignment: 16)
        defer { SecureWipe.bytes(plain.baseAddress, count: plain.count); plain.deallocate() }
        let sealed = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.storedBlockSize, alignment: 16)
        defer { sealed.deallocate() }

        /// Zeros plaintext from..<to inside `block`, merging with what it holds.
        func zeroPart(_ block: Int64, from: Int64, to: Int64) throws {
            let stored = try readStoredBlocks(from: block, through: block, plaintextSize: size)
            defer { stored.deallocate() }
            if isHole(UnsafeRawBufferPointer(stored)) { return }
            let count = length(block)
            try cipher.open(index: block, stored: UnsafeRawBufferPointer(stored), into: plain.baseAddress!)
            (plain.baseAddress! + Int(from - block * bs)).initializeMemory(as: UInt8.self, repeating: 0, count: Int(to - from))
            try cipher.seal(index: block, plaintext: UnsafeRawBufferPointer(rebasing: plain[0..<count]), into: sealed.baseAddress!)
            try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(rebasing: sealed[0..<(count + BlockLayout.overhead)]), at: slotOffset(block))
        }

        let wholeFirst = coveredWhole(first) ? first : first + 1
        let wholeLast = last > first && !coveredWhole(last) ? last - 1 : last
        let holes = wholeFirst <= wholeLast && canStoreHoles
        // The flag first: a failure there (no key) leaves the file as it was.
        if holes { try markSparse() }
        if !coveredWhole(first) { try zeroPart(first, from: offset, to: min(stop, first * bs + Int64(length(first)))) }
        if last > first && !coveredWhole(last) { try zeroPart(last, from: last * bs, to: stop) }
        guard wholeFirst <= wholeLast else { return }
        guard holes else {
            plain.initializeMemory(as: UInt8.self, repeating: 0)
            for block in wholeFirst...wholeLast {
                let count = length(block)
                try cipher.seal(index: block, plaintext: UnsafeRawBufferPointer(rebasing: plain[0..<count]), into: sealed.baseAddress!)
                try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(rebasing: sealed[0..<(count + BlockLayout.overhead)]), at: slotOffset(block))
            }
            return
        }
        try clearStored(from: slotOffset(wholeFirst), to: slotOffset(wholeLast) + Int64(length(wholeLast) + BlockLayout.overhead),
                        keepAllocated: keepAllocated)
    }

    /// Makes backing bytes from..<to (inside the file) read as zeros: FALLOC_FL_PUNCH_HOLE
    /// (space given back) or, `keepAllocated`, FALLOC_FL_ZERO_RANGE (space kept). A backing
    /// filesystem without the mode gets the nearest it has: a punched range reserved again,
    /// else zeros written.
    private func clearStored(from: Int64, to: Int64, keepAllocated: Bool) throws {
        let length = to - from
        guard length > 0 else { return }
        let keep = SystemConstants.fallocateKeepSize
        let punch = SystemConstants.fallocatePunchHole | keep
        func unsupported(_ error: Errno) -> Bool { error.rawValue == EOPNOTSUPP || error.rawValue == ENOSYS }
        do throws(Errno) {
            try SystemCall.fallocate(fd: fd, mode: keepAllocated ? SystemConstants.fallocateZeroRange | keep : punch, offset: from, length: length)
            return
        } catch {
            guard unsupported(error) else { throw MAMError.system("zero range", errno: error.rawValue) }
        }
        if keepAllocated, (try? SystemCall.fallocate(fd: fd, mode: punch, offset: from, length: length)) != nil {
            try FileIO.reserve(fd, offset: from, length: length)
            return
        }
        let zeros = [UInt8](repeating: 0, count: 1 << 16)
        var at = from
        while at < to {
            let count = Int(min(Int64(zeros.count), to - at))
            try zeros.withUnsafeBytes { try FileIO.pwriteFully(fd, UnsafeRawBufferPointer(rebasing: $0[0..<count]), at: at) }
            at += Int64(count)
        }
    }
}
