import CSystem
import Foundation
import MAMProtection

/// How the non-replicated provider marks its items in the local root: extended attributes on
/// the local file or directory (they move with it and survive the mount's atomic rewrites,
/// which copy xattrs).
///
/// | attribute                 | value                                   | on                    |
/// |---------------------------|-----------------------------------------|-----------------------|
/// | `user.mam.fp.item`        | item identifier                         | files and directories |
/// | `user.mam.fp.version`     | contentVersion the local copy is of     | files                 |
/// | `user.mam.fp.size`        | remote (plaintext) size of that version | files                 |
/// | `user.mam.fp.placeholder` | "1" while the contents are not present  | placeholders          |
/// | `user.mam.fp.stamp`       | `inode:size:mtime_ns` of the local file when it was last materialized or uploaded; any other stat means un-uploaded changes | materialized files |
///
/// A placeholder is an empty regular file carrying `placeholder`; the mount reports
/// `user.mam.fp.size` as its size and calls `startProvidingItem` before opening it. Symlinks
/// cannot carry user xattrs; they are created directly and need no materializing.
public struct LocalItemAttributes: Equatable, Sendable {
    public static let itemAttribute = "user.mam.fp.item"
    public static let versionAttribute = "user.mam.fp.version"
    public static let sizeAttribute = "user.mam.fp.size"
    public static let placeholderAttribute = "user.mam.fp.placeholder"
    public static let stampAttribute = "user.mam.fp.stamp"
    /// Every attribute above (the mount may hide them from listxattr).
    public static let all = [itemAttribute, versionAttribute, sizeAttribute, placeholderAttribute, stampAttribute]

    /// The remote item the local file stands for.
    public var identifier: ItemIdentifier
    /// The content version the local copy holds (or will hold once materialized).
    public var contentVersion: String?
    /// Plaintext size in bytes of that version.
    public var size: Int64
    /// True while only a placeholder is present.
    public var isPlaceholder: Bool
    /// Stat of the local file when last materialized or uploaded.
    var stamp: LocalStamp?

    /// Reads the attributes of `path` (not following symlinks); nil when it is not a provider item.
    public static func read(path: String) -> LocalItemAttributes? {
        guard let id = FileSystem.getAttribute(path, itemAttribute) else { return nil }
        return LocalItemAttributes(
            identifier: ItemIdentifier(id),
            contentVersion: FileSystem.getAttribute(path, versionAttribute),
            size: FileSystem.getAttribute(path, sizeAttribute).flatMap { Int64($0) } ?? 0,
            isPlaceholder: FileSystem.getAttribute(path, placeholderAttribute) == "1",
            stamp: FileSystem.getAttribute(path, stampAttribute).flatMap { LocalStamp(encoded: $0) })
    }

    /// Reads the attributes of the regular file or directory `relative` below `tree` (no
    /// symlink followed, no special file opened); nil when it is not a provider item.
    static func read(_ relative: String, in tree: ConfinedDirectory) -> LocalItemAttributes? {
        guard let fd = tree.openForAttributes(relative) else { return nil }
        defer { close(fd) }
        return read(fd: fd)
    }

    /// Reads the attributes of an open file or directory; nil when it is not a provider item.
    static func read(fd: Int32) -> LocalItemAttributes? {
        func get(_ name: String) -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { fgetxattr(fd, name, $0.baseAddress, $0.count) }
            return n >= 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }
        guard let id = get(itemAttribute) else { return nil }
        return LocalItemAttributes(
            identifier: ItemIdentifier(id),
            contentVersion: get(versionAttribute),
            size: get(sizeAttribute).flatMap { Int64($0) } ?? 0,
            isPlaceholder: get(placeholderAttribute) == "1",
            stamp: get(stampAttribute).flatMap { LocalStamp(encoded: $0) })
    }

    /// Writes the attributes to the regular file `relative` below `tree`.
    /// - Throws: `MAMError.system` (ELOOP for a symlink, EINVAL for a special file).
    func write(_ relative: String, in tree: ConfinedDirectory) throws {
        guard let fd = tree.openForAttributes(relative) else { throw MAMError.fromErrno("open \(relative)") }
        defer { close(fd) }
        try write(fd: fd)
    }

    /// Removes every provider attribute from `relative` below `tree`.
    static func clear(_ relative: String, in tree: ConfinedDirectory) {
        tree.removeAttributes(relative, all)
    }

    /// Writes the attributes to the open file `fd` (the placeholder flag is set or removed).
    func write(fd: Int32) throws {
        try FileSystem.setAttribute(fd: fd, Self.itemAttribute, identifier.rawValue)
        if let contentVersion { try FileSystem.setAttribute(fd: fd, Self.versionAttribute, contentVersion) }
        try FileSystem.setAttribute(fd: fd, Self.sizeAttribute, String(size))
        if isPlaceholder {
            try FileSystem.setAttribute(fd: fd, Self.placeholderAttribute, "1")
            _ = fremovexattr(fd, Self.stampAttribute)
        } else {
            _ = fremovexattr(fd, Self.placeholderAttribute)
            if let stamp { try FileSystem.setAttribute(fd: fd, Self.stampAttribute, stamp.encoded) }
        }
    }

    /// Writes the attributes to `path` (regular files and directories).
    func write(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(path)") }
        defer { close(fd) }
        try write(fd: fd)
    }

    /// Removes every provider attribute from `path`.
    static func clear(path: String) {
        for name in all { FileSystem.removeAttribute(path, name) }
    }

    /// True when the materialized file at `path` (with stat `st`) differs from what was last
    /// materialized or uploaded: it holds changes the remote does not have.
    func hasLocalChanges(_ st: stat) -> Bool {
        guard !isPlaceholder else { return false }
        guard let stamp else { return true }
        return stamp != LocalStamp(st)
    }
}

/// What the mount needs to know about a placeholder.
public struct PlaceholderInfo: Equatable, Sendable {
    /// The remote item.
    public var identifier: ItemIdentifier
    /// The size to report (plaintext bytes, from the remote).
    public var size: Int64
}
