import Foundation
import MAMSystem

/// Owner tags of directories, kept with the directory in the backing tree as the extended
/// attribute `user.mam.owner` (so they follow renames). Files inside inherit the owner of the
/// nearest tagged ancestor.
public enum DirectoryOwner {
    /// The extended attribute name.
    public static let attributeName = "user.mam.owner"

    /// The owner tag of the directory open as `fd`, or nil when untagged ("" = unmanaged tag).
    public static func read(fd: Int32) -> String? {
        (try? tag(fd: fd)) ?? nil
    }

    /// The owner tag of the directory at `path`, or nil.
    public static func read(path: String) -> String? {
        (try? tag(path: path)) ?? nil
    }

    /// `read(fd:)` that tells a missing tag (nil) from a read that failed.
    /// - Throws: `Errno` of fgetxattr other than ENODATA (EACCES when the caller may not read
    ///   the directory, ENOTSUP, EIO).
    public static func tag(fd: Int32) throws(Errno) -> String? {
        try ExtendedAttributes(descriptor: fd).string(attributeName)
    }

    /// `read(path:)` that tells a missing tag (nil) from a read that failed.
    /// - Throws: `Errno` of getxattr other than ENODATA.
    public static func tag(path: String) throws(Errno) -> String? {
        try ExtendedAttributes(path: path).string(attributeName)
    }

    /// Tags the directory at `path`.
    /// - Throws: `.system` when the backing filesystem refuses user xattrs.
    public static func write(path: String, owner: String) throws {
        do {
            try ExtendedAttributes(path: path).set(attributeName, string: AccountIdentity.canonical(owner))
        } catch {
            throw MAMError.system("tag directory \(path)", errno: error.rawValue)
        }
    }

    /// Tags the directory open as `fd` (O_PATH too: through its /proc/self/fd path; `path`
    /// for messages only).
    /// - Throws: `.system` when the backing filesystem refuses user xattrs.
    public static func write(fd: Int32, path: String, owner: String) throws {
        do {
            try ExtendedAttributes(descriptorPath: fd).set(attributeName, string: AccountIdentity.canonical(owner))
        } catch {
            throw MAMError.system("tag directory \(path)", errno: error.rawValue)
        }
    }

    /// The inherited owner of `path`: the tag of the nearest tagged directory among `path`
    /// (if a directory) and its ancestors, stopping at `root` (inclusive) or at `/`.
    public static func inherited(path: String, root: String? = nil) -> String? {
        var current = PathName.normalized(path)
        let stop = root.map { PathName.normalized($0) }
        while true {
            if let owner = read(path: current) { return owner }
            if current == stop || current == "/" || current.isEmpty { return nil }
            current = PathName.directory(of: current)
        }
    }
}
