import Foundation
import MAMSystem

/// Replaces a file atomically: an unnamed temp file (O_TMPFILE) in the target's directory,
/// written, fsynced, given the final mode/owner/times, linked into the directory only when
/// complete and renamed over the target, then the directory fsynced. A command killed before
/// `commit()` leaves nothing behind (the kernel frees an unlinked O_TMPFILE), so no partial
/// plaintext stays on disk. Where the filesystem has no O_TMPFILE (EOPNOTSUPP, or EISDIR on
/// kernels that predate it) a named 0600 temp file is used instead.
/// On any failure the temp file is removed and the target is left as it was.
public final class AtomicFileWriter {
    /// Descriptor of the temp file (read-write).
    public let fd: Int32
    /// Path of the named temp file; nil when the temp file is an unnamed O_TMPFILE.
    public let temporaryPath: String?
    /// Path that `commit()` replaces.
    public let targetPath: String
    private let directoryFD: Int32
    private let targetName: String
    private var finished = false

    /// Creates the temp file next to `targetPath`.
    /// - Throws: `.cannotCreateOutput` when the directory is missing, not writable or full.
    public convenience init(targetPath: String) throws {
        let directory: FileDescriptor
        do {
            directory = try FileDescriptor.open(PathName.directory(of: targetPath), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        } catch {
            throw MAMError.cannotCreateOutput("\(targetPath): \(error)")
        }
        try self.init(adopting: directory, name: PathName.lastComponent(of: targetPath), path: targetPath, fullDiskAsSystemError: false)
    }

    /// Creates the temp file in the open directory `directory` (borrowed: it stays the
    /// caller's; O_PATH is enough), to replace its entry `name`; every later step is relative
    /// to the directory, reopened from the descriptor (".", for the fsync), so no path is
    /// resolved again. `path` names the target in messages only.
    /// - Throws: `.system` with ENOSPC or EDQUOT for a full disk, `.cannotCreateOutput` when
    ///   the directory is not writable.
    public convenience init(in directory: Int32, name: String, path: String) throws {
        let reopened: FileDescriptor
        do {
            reopened = try FileDescriptor.open(in: directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        } catch {
            throw MAMError.cannotCreateOutput("\(path): \(error)")
        }
        try self.init(adopting: reopened, name: name, path: path, fullDiskAsSystemError: true)
    }

    private init(adopting directory: consuming FileDescriptor, name: String, path: String, fullDiskAsSystemError: Bool) throws {
        func failure(_ error: Errno) -> MAMError {
            if fullDiskAsSystemError, error.rawValue == ENOSPC || error.rawValue == EDQUOT {
                return .system("create a temp file for \(path)", errno: error.rawValue)
            }
            return .cannotCreateOutput("\(path): \(error)")
        }
        self.targetPath = path
        targetName = name
        var temporaryPath: String?
        var fd: Int32 = -1
        var unnamedFailure: Errno?
        do {
            fd = try TemporaryFile.createUnnamed(in: directory.rawValue, flags: O_RDWR, mode: 0o600).take()
        } catch {
            unnamedFailure = error
        }
        if let unnamedFailure {
            guard TemporaryFile.isUnavailable(unnamedFailure) else { throw failure(unnamedFailure) }
            do {
                let (named, tempName) = try Self.createNamed(in: directory.rawValue, for: name)
                temporaryPath = PathName.appending(tempName, to: PathName.directory(of: path))
                fd = named
            } catch {
                throw failure(error)
            }
        }
        self.fd = fd
        self.directoryFD = directory.take()
        self.temporaryPath = temporaryPath
    }

    /// A new 0600 temp file in `directory` named after `target` with a random suffix (O_EXCL,
    /// never through a symlink), where the filesystem has no O_TMPFILE: its descriptor (the
    /// caller's to close) and name.
    private static func createNamed(in directory: Int32, for target: String) throws(Errno) -> (Int32, String) {
        while true {
            let name = temporaryName(for: target, suffix: String(UInt64.random(in: 0...UInt64.max), radix: 36))
            do {
                let file = try FileDescriptor.open(in: directory, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o600)
                return (file.take(), name)
            } catch {
                if error == .fileExists { continue }
                throw error
            }
        }
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

    /// fsyncs, puts the file in place of the target and fsyncs the directory. `check`, when
    /// given, runs after the fsync and right before the file goes in place; what it throws
    /// aborts the commit (the writer's file dropped, the target unchanged) and is rethrown.
    /// - Throws: `.system` (e.g. ENOSPC, EIO) — the target is unchanged then; `check`'s error.
    public func commit(checkingFirst check: (() throws -> Void)? = nil) throws {
        guard !finished else { return }
        guard fsync(fd) == 0 else { let e = MAMError.fromErrno("fsync \(targetPath)"); abort(); throw e }
        if let check {
            do { try check() } catch { abort(); throw error }
        }
        if let temporaryPath {
            guard renameat(directoryFD, PathName.lastComponent(of: temporaryPath), directoryFD, targetName) == 0 else {
                let e = MAMError.fromErrno("rename to \(targetPath)"); abort(); throw e
            }
        } else {
            try linkIntoPlace()
        }
        finished = true
        close(fd)
        _ = fsync(directoryFD)
        close(directoryFD)
    }

    /// Links the finished O_TMPFILE in: straight to the target name when it is free, else
    /// under a temp name that is then renamed over the target (linkat cannot replace).
    private func linkIntoPlace() throws {
        if link(as: targetName) { return }
        guard errno == EEXIST else { let e = MAMError.fromErrno("link \(targetPath)"); abort(); throw e }
        for _ in 0..<16 {
            let name = Self.temporaryName(for: targetName, suffix: String(UInt64.random(in: 0...UInt64.max), radix: 36))
            guard link(as: name) else {
                if errno == EEXIST { continue }
                let e = MAMError.fromErrno("link \(targetPath)"); abort(); throw e
            }
            guard renameat(directoryFD, name, directoryFD, targetName) == 0 else {
                let e = MAMError.fromErrno("rename to \(targetPath)")
                unlinkat(directoryFD, name, 0)
                abort()
                throw e
            }
            return
        }
        let e = MAMError.system("link \(targetPath)", errno: EEXIST); abort(); throw e
    }

    /// Links the open temp file in as `name` (see `TemporaryFile.publish`); false with `errno`.
    private func link(as name: String) -> Bool {
        do {
            try TemporaryFile.publish(fd, in: directoryFD, as: name)
            return true
        } catch {
            errno = error.rawValue
            return false
        }
    }

    private static func temporaryName(for target: String, suffix: String) -> String {
        WriterTemporaryName.make(for: target, suffix: suffix)
    }

    /// Drops the temp file; the target is untouched.
    public func abort() {
        guard !finished else { return }
        finished = true
        close(fd)
        if let temporaryPath { unlinkat(directoryFD, PathName.lastComponent(of: temporaryPath), 0) }
        close(directoryFD)
    }

    deinit { abort() }
}
