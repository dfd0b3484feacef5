import CSystem
import Foundation

/// Owner tags of directories, kept with the directory in the backing tree as the extended
/// attribute `user.mam.owner` (so they follow renames). Files inside inherit the owner of the
/// nearest tagged ancestor.
public enum DirectoryOwner {
    /// The extended attribute name.
    public static let attributeName = "user.mam.owner"

    /// The owner tag of the directory open as `fd`, or nil when untagged ("" = unmanaged tag).
    public static func read(fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { fgetxattr(fd, attributeName, $0.baseAddress, $0.count) }
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// The owner tag of the directory at `path`, or nil.
    public static func read(path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { getxattr(path, attributeName, $0.baseAddress, $0.count) }
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Tags the directory at `path`.
    /// - Throws: `.system` when the backing filesystem refuses user xattrs.
    public static func write(path: String, owner: String) throws {
        let bytes = Array(AccountIdentity.canonical(owner).utf8)
        let rc = bytes.withUnsafeBytes { setxattr(path, attributeName, $0.baseAddress, $0.count, 0) }
        guard rc == 0 else { throw MAMError.fromErrno("tag directory \(path)") }
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
