import Glibc
import MAMProtection
import MAMSystem

/// Backing objects reached from a backing path without trusting the path: every lookup is
/// resolved below the backing root's descriptor with openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS), so a component that another user swapped for a symlink (or a name
/// leading out of the backing directory) fails instead of being followed.
extension OverlayFilesystem {
    /// The part of `path` (a backing path from `backingPath`) below the backing root.
    /// - Throws: ESTALE when `path` does not lie below the root.
    func pathBelowRoot(_ path: String) throws -> String {
        let prefix = rootPath.hasSuffix("/") ? rootPath : rootPath + "/"
        guard path.hasPrefix(prefix), path.count > prefix.count else { throw FilesystemError(code: ESTALE) }
        return String(path.dropFirst(prefix.count))
    }

    /// Opens `path` (a backing path below the root) with `flags` without crossing a symlink
    /// or leaving the backing directory.
    /// - Throws: `FilesystemError` with the open's errno (ELOOP for a symlink on the way,
    ///   EXDEV for an escape, ESTALE for a path outside the root).
    func openConfined(_ path: String, _ flags: Int32) throws -> FileDescriptor {
        let relative = try pathBelowRoot(path)
        let root = try table.root.descriptor()
        do {
            return try FileDescriptor.openBeneath(root, relative, flags | O_NOFOLLOW)
        } catch {
            throw FilesystemError(code: error.rawValue)
        }
    }

    /// Runs `body` with the directory holding `path` (a backing path below the root), open
    /// for reading, and the last component of `path`: where a rewrite of the object replaces
    /// it by name.
    func withConfinedParent<R>(of path: String, _ body: (_ directory: Int32, _ name: String) throws -> R) throws -> R {
        let relative = try pathBelowRoot(path)
        let root = try table.root.descriptor()
        let directory: FileDescriptor
        do {
            directory = try FileDescriptor.openBeneath(root, PathName.directory(of: relative), O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw FilesystemError(code: error.rawValue)
        }
        return try body(directory.rawValue, PathName.lastComponent(of: relative))
    }
}
