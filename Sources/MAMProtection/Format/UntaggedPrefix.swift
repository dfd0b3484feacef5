import Glibc
import MAMSystem

/// What a write does to the first bytes of an untagged file. An untagged file is whatever does
/// not start with the magic, so a write that puts the 8 magic bytes at offset 0 (in one write,
/// or by completing a prefix written before, or by appending to a file shorter than 8 bytes)
/// would turn it into a tagged file whose owner the written bytes name: a change of owner that
/// no admission decided. The mount refuses such writes (`writeWouldTag`).
public enum UntaggedPrefix {
    /// Whether writing `bytes` at `offset` of the untagged file `fd` leaves its bytes 0 ..< 8
    /// equal to the magic. Reads at most the file's first 8 bytes, only when the write starts
    /// before byte 8 and is not empty.
    /// - Parameters:
    ///   - fd: the untagged file, open for reading (stored offset 0 = plaintext offset 0).
    ///   - bytes: the bytes about to be written.
    ///   - offset: where they go, in bytes (negative offsets are the write's own error).
    /// - Returns: true when the file would start with the magic afterwards.
    /// - Throws: `MAMError.system` when the first bytes cannot be read.
    public static func writeWouldTag(fd: Int32, writing bytes: UnsafeRawBufferPointer, at offset: Int64) throws -> Bool {
        let length = ProtectedFileHeader.magic.count
        guard offset >= 0, offset < Int64(length), bytes.count > 0 else { return false }
        var existing = [UInt8](repeating: 0, count: length)
        let filled: Int
        do {
            filled = try existing.withUnsafeMutableBytes { try SystemCall.pread(fd: fd, into: $0, at: 0) }
        } catch let error as Errno {
            throw MAMError.system("reading the first bytes of an untagged file", errno: error.rawValue)
        }
        return startsWithMagic(existing: Array(existing[0..<filled]), writing: bytes, at: Int(offset))
    }

    /// Whether a file whose first bytes are `existing` (all of them when it is shorter than 8
    /// bytes) starts with the magic after `bytes` are written at `offset` (0 ... 7). A gap
    /// between the old end and `offset` reads as zeros, which the magic does not contain.
    static func startsWithMagic(existing: [UInt8], writing bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
        let magic = ProtectedFileHeader.magic
        var prefix = Array(existing.prefix(magic.count))
        let end = min(magic.count, offset + bytes.count)
        if prefix.count < end { prefix += [UInt8](repeating: 0, count: end - prefix.count) }
        for index in offset..<end { prefix[index] = bytes[index - offset] }
        return prefix == magic
    }
}
