import CSystem
import Glibc
import MAMSystem

/// What an attribute reply needs of a protected-file header: the owner, whether the body is
/// encrypted, and so the header's length (where the body starts).
public struct HeaderSummary: Equatable, Sendable {
    /// Canonical accountId of the owner; "" for an unmanaged-tagged file.
    public let owner: String
    /// True when the body is encrypted.
    public let isEncrypted: Bool

    /// Length of the header in bytes (13 + owner bytes, plus 80 when encrypted), as
    /// `ProtectedFileHeader.length`.
    public var length: Int { ProtectedFileHeader.encodedLength(ownerBytes: owner.utf8.count, encrypted: isEncrypted) }

    public init(owner: String, isEncrypted: Bool) {
        self.owner = owner
        self.isEncrypted = isEncrypted
    }
}

extension ProtectedFileHeader {
    /// The header's owner and kind (`HeaderSummary`).
    public var summary: HeaderSummary { HeaderSummary(owner: owner, isEncrypted: isEncrypted) }
}

/// The header hint: a copy of a tagged file's `HeaderSummary` in the backing file's extended
/// attribute `user.mam.header` (docs/FORMAT.md, "Header hint"), so a mount answers stat and
/// lookup with the plaintext size without reading the file's first block.
///
/// Value: version byte 1, flags byte (bit 0 = encrypted; other bits 0), then the owner's
/// canonical accountId in UTF-8 (empty for unmanaged-tagged; never empty when encrypted).
/// 2 + L bytes, which ext4 keeps inside the inode for an accountId of up to about 60 bytes.
///
/// The hint is advisory: the header in the file is what reads, writes, keys and access use.
/// Every writer of a header stores the hint beside it (best effort: a filesystem without user
/// extended attributes, or a full one, leaves the file without a hint, and readers fall back
/// to the header); a reader that finds the hint and the header disagree (the file was rewritten
/// by another program) rewrites the hint from the header.
public enum HeaderHint {
    /// The extended attribute's name.
    public static let attributeName = "user.mam.header"
    static let version: UInt8 = 1
    /// Longest value: version, flags and a 255-byte owner.
    static let maximumLength = 2 + 255

    /// True when `name` (the bytes of an attribute name, without NUL) is the hint's.
    public static func isAttribute(_ name: UnsafeRawBufferPointer) -> Bool {
        name.elementsEqual(attributeName.utf8)
    }

    /// The hint's value for `summary`.
    public static func encode(_ summary: HeaderSummary) -> [UInt8] {
        [version, summary.isEncrypted ? 1 : 0] + Array(summary.owner.utf8)
    }

    /// The summary a value names; nil for a value of another version, unknown flags, an owner
    /// that is not canonical UTF-8 of at most 255 bytes, or an encrypted file without owner.
    public static func decode(_ value: UnsafeRawBufferPointer) -> HeaderSummary? {
        guard value.count >= 2, value.count <= maximumLength, value[0] == version, value[1] & ~1 == 0 else { return nil }
        guard let owner = String(validating: value[2...], as: UTF8.self), owner == AccountIdentity.canonical(owner) else { return nil }
        let encrypted = value[1] == 1
        if encrypted && owner.isEmpty { return nil }
        return HeaderSummary(owner: owner, isEncrypted: encrypted)
    }

    /// Stores the hint for `header` on the open file `fd` (not O_PATH), or removes any hint
    /// when `header` is nil (the file is untagged). Best effort: failures are ignored (the
    /// file then has no hint or, if removal also fails, a reader's check repairs it).
    public static func store(_ header: ProtectedFileHeader?, fd: Int32) {
        guard let header else {
            _ = fremovexattr(fd, attributeName)
            return
        }
        let value = encode(header.summary)
        let stored = value.withUnsafeBytes { fsetxattr(fd, attributeName, $0.baseAddress, $0.count, 0) }
        if stored != 0 { _ = fremovexattr(fd, attributeName) }
    }

    /// The hint of the open file `fd` (not O_PATH).
    /// - Returns: nil as `read(path:)`.
    public static func read(fd: Int32) -> HeaderSummary? {
        withValue { fgetxattr(fd, attributeName, $0, $1) }
    }

    /// The hint of the file `path` names (a final symlink followed: pass a /proc/self/fd path).
    /// - Returns: nil when there is none, it does not decode, or the filesystem cannot say.
    public static func read(path: String) -> HeaderSummary? {
        withValue { getxattr(path, attributeName, $0, $1) }
    }

    /// The hint of `name` in the directory `directoryFD`, a final symlink not followed
    /// (getxattrat(2); before Linux 6.13, lgetxattr(2) of the directory's /proc/self/fd path).
    /// - Returns: nil as `read(path:)`.
    public static func read(directoryFD: Int32, name: UnsafePointer<CChar>) -> HeaderSummary? {
        var unsupported = false
        let summary = withValue { buffer, size in
            let n = mamfs_getxattrat_nofollow(directoryFD, name, attributeName, buffer, UInt32(size))
            if n < 0 && errno == ENOSYS { unsupported = true }
            return n
        }
        guard unsupported else { return summary }
        let path = procPath(directoryFD: directoryFD, name: name)
        return withValue { buffer, size in path.withUnsafeBufferPointer { lgetxattr($0.baseAddress!, attributeName, buffer, size) } }
    }

    /// Whether `name` in the directory `directoryFD` carries a hint, a final symlink not
    /// followed: its length asked for alone (getxattrat(2) with size 0; before Linux 6.13,
    /// lgetxattr(2) of the directory's /proc/self/fd path), nothing read or decoded.
    /// False when it has none or the filesystem cannot say.
    public static func isPresent(directoryFD: Int32, name: UnsafePointer<CChar>) -> Bool {
        let n = mamfs_getxattrat_nofollow(directoryFD, name, attributeName, nil, 0)
        if n >= 0 || errno != ENOSYS { return n > 0 }
        return procPath(directoryFD: directoryFD, name: name).withUnsafeBufferPointer { lgetxattr($0.baseAddress!, attributeName, nil, 0) } > 0
    }

    /// The /proc/self/fd path of `name` in `directoryFD`, NUL-terminated, with the name's bytes
    /// as they are (names need not be UTF-8).
    private static func procPath(directoryFD: Int32, name: UnsafePointer<CChar>) -> [CChar] {
        Array((ProcessDescriptorPath.path(of: directoryFD) + "/").utf8CString.dropLast())
            + Array(UnsafeBufferPointer(start: name, count: strlen(name) + 1))
    }

    private static func withValue(_ get: (UnsafeMutableRawPointer, Int) -> Int) -> HeaderSummary? {
        withUnsafeTemporaryAllocation(byteCount: maximumLength, alignment: 1) { buffer in
            let n = get(buffer.baseAddress!, buffer.count)
            guard n >= 0 else { return nil }
            return decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
    }
}
