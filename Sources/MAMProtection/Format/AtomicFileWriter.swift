import CSystem
import Foundation

/// Replaces a file atomically: a 0600 temp file in the target's directory, written, fsynced,
/// given the final mode/owner/times, renamed over the target, then the directory fsynced.
/// On any failure the temp file is removed and the target is left as it was.
public final class AtomicFileWriter {
    /// Descriptor of the temp file (read-write).
    public let fd: Int32
    /// Path of the temp file.
    public let temporaryPath: String
    /// Path that `commit()` renames the temp file to.
    public let targetPath: String
    private var finished = false

    /// Creates the temp file next to `targetPath`.
    /// - Throws: `.cannotCreateOutput` when the directory is not writable or full.
    public init(targetPath: String) throws {
        self.targetPath = targetPath
        let directory = PathName.directory(of: targetPath)
        let base = PathName.lastComponent(of: targetPath)
        var template = Array(((directory.isEmpty ? "." : directory) + "/.\(base.prefix(80)).mamfs-tmp-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mamfs_mkostemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw MAMError.cannotCreateOutput("\(targetPath): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        self.fd = fd
        self.temporaryPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Copies mode, owner and (optionally) times of an existing file onto the temp file.
    public func copyAttributes(from st: stat, keepTimes: Bool) {
        _ = fchown(fd, st.st_uid, st.st_gid)
        _ = fchmod(fd, st.st_mode & 0o7777)
        if keepTimes {
            var times = [st.st_atim, st.st_mtim]
            _ = futimens(fd, &times)
        }
    }

    /// fsyncs, renames over the target and fsyncs the directory.
    /// - Throws: `.system` (e.g. ENOSPC, EIO) — the target is unchanged then.
    public func commit() throws {
        guard !finished else { return }
        guard fsync(fd) == 0 else { let e = MAMError.fromErrno("fsync \(targetPath)"); abort(); throw e }
        guard rename(temporaryPath, targetPath) == 0 else { let e = MAMError.fromErrno("rename to \(targetPath)"); abort(); throw e }
        finished = true
        close(fd)
        let directory = PathName.directory(of: targetPath)
        let dirfd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 { _ = fsync(dirfd); close(dirfd) }
    }

    /// Removes the temp file; the target is untouched.
    public func abort() {
        guard !finished else { return }
        finished = true
        close(fd)
        unlink(temporaryPath)
    }

    deinit { abort() }
}
