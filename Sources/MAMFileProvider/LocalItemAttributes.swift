import Foundation
import MAMProtection
import MAMSystem

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
        read { FileSystem.getAttribute(path, $0) }
    }

    /// Reads the attributes of the object open as `fd` (O_PATH too, through its /proc/self/fd
    /// path); nil when it is not a provider item.
    public static func read(descriptor fd: Int32) -> LocalItemAttributes? {
        let attributes = ExtendedAttributes(descriptorPath: fd)
        return read { (try? attributes.string($0)) ?? nil }
    }

    /// Reads the attributes of the regular file or directory `relative` below `tree` (no
    /// symlink followed, no special file opened); nil when it is not a provider item.
    static func read(_ relative: String, in tree: ConfinedDirectory) -> LocalItemAttributes? {
        tree.withAttributePath(relative, failure: nil) { fd in read(descriptor: fd) }
    }

    private static func read(_ get: (String) -> String?) -> LocalItemAttributes? {
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
        try tree.setAttribute(relative, Self.itemAttribute, identifier.rawValue)
        if let contentVersion { try tree.setAttribute(relative, Self.versionAttribute, contentVersion) }
        try tree.setAttribute(relative, Self.sizeAttribute, String(size))
        if isPlaceholder {
            try tree.setAttribute(relative, Self.placeholderAttribute, "1")
            tree.removeAttributes(relative, [Self.stampAttribute])
        } else {
            tree.removeAttributes(relative, [Self.placeholderAttribute])
            if let stamp { try tree.setAttribute(relative, Self.stampAttribute, stamp.encoded) }
        }
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
            try? ExtendedAttributes(descriptor: fd).remove(Self.stampAttribute)
        } else {
            try? ExtendedAttributes(descriptor: fd).remove(Self.placeholderAttribute)
            if let stamp { try FileSystem.setAttribute(fd: fd, Self.stampAttribute, stamp.encoded) }
        }
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
