import Glibc
import MAMProtection
import MAMSystem

/// Backing objects reached from a backing path without trusting the path: every lookup is
/// resolved below the backing root (`confinedRoot`: openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS), else a walk by descriptors with O_NOFOLLOW), so a component that
/// another user swapped for a symlink (or a name leading out of the backing directory) fails
/// instead of being followed.
extension OverlayFilesystem {
    /// The part of `path` (a backing path from `backingPath`) below the backing root.
    /// - Throws: ESTALE when `path` does not lie below the root.
    func pathBelowRoot(_ path: String) throws -> String {
        guard let relative = PathName.relative(path, below: rootPath) else { throw FilesystemError(code: ESTALE) }
        return relative
    }

    /// Opens `path` (a backing path below the root) with `flags` without crossing a symlink
    /// or leaving the backing directory.
    /// - Throws: `FilesystemError` with the open's errno (ELOOP for a symlink on the way,
    ///   EXDEV for an escape, ESTALE for a path outside the root).
    func openConfined(_ path: String, _ flags: Int32) throws -> FileDescriptor {
        try openConfined(relative: try pathBelowRoot(path), flags)
    }

    private func openConfined(relative: String, _ flags: Int32) throws -> FileDescriptor {
        let fd = confinedRoot.open(relative, flags)
        guard fd >= 0 else { throw FilesystemError.current() }
        return FileDescriptor(adopting: fd)
    }

    /// Runs `body` with the directory holding `path` (a backing path below the root), open
    /// O_PATH, and the last component of `path`: where a rewrite of the object replaces it
    /// by name.
    func withConfinedParent<R>(of path: String, _ body: (_ directory: Int32, _ name: String) throws -> R) throws -> R {
        let relative = try pathBelowRoot(path)
        let parent = PathName.parent(of: relative)
        let directory = try openConfined(relative: parent, SystemConstants.pathOnly | O_DIRECTORY)
        return try body(directory.rawValue, PathName.lastComponent(of: relative))
    }
}
