import CSystem
import Glibc

/// Calls on raw, non-owning descriptors, for code that keeps descriptors it does not own as
/// `Int32` (descriptor caches, descriptors the kernel handed over). `FileDescriptor` forwards
/// to these. Failures throw the call's `Errno`; EINTR is retried where the call is restartable.
public enum SystemCall {
    /// Reads up to `buffer.count` bytes at byte `offset` of `fd`, retrying EINTR and short
    /// reads, stopping early only at end of file.
    /// - Returns: bytes read (less than `buffer.count` only at end of file).
    /// - Throws: the read's `Errno` (EIO, EISDIR, EBADF, ...).
    public static func pread(fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        return try transfer(count: buffer.count, atEnd: { $0 }) { done in
            Glibc.pread(fd, base + done, buffer.count - done, off_t(offset + Int64(done)))
        }
    }

    /// Writes all of `buffer` at byte `offset` of `fd`, retrying EINTR and short writes.
    /// - Throws: the write's `Errno` (ENOSPC, EIO, EFBIG, ...); EIO when the kernel writes nothing.
    public static func pwrite(fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        guard let base = buffer.baseAddress else { return }
        _ = try transfer(count: buffer.count, atEnd: { (_: Int) throws(Errno) -> Int in throw Errno.ioError }) { done in
            Glibc.pwrite(fd, base + done, buffer.count - done, off_t(offset + Int64(done)))
        }
    }

    /// The loop of a full positional transfer: `step(done)` moves the next bytes (the call's
    /// result: a count, 0 at the end, -1 with errno); EINTR is retried; `atEnd(done)` answers
    /// a 0 before `count` bytes moved.
    private static func transfer(count: Int, atEnd: (Int) throws(Errno) -> Int,
                                 _ step: (Int) -> Int) throws(Errno) -> Int {
        var done = 0
        while done < count {
            let n = step(done)
            if n < 0 {
                if errno == EINTR { continue }
                throw Errno.current
            }
            if n == 0 { return try atEnd(done) }
            done += n
        }
        return done
    }

    /// Attributes of what `fd` refers to, also for an O_PATH descriptor (fstatat with
    /// AT_EMPTY_PATH).
    public static func stat(fd: Int32) throws(Errno) -> stat {
        var st = Glibc.stat()
        guard fstatat(fd, "", &st, SystemConstants.emptyPath) == 0 else { throw Errno.current }
        return st
    }

    /// chmod of what `fd` (also an O_PATH descriptor) refers to, never of a symlink's target:
    /// fchmodat2 with AT_EMPTY_PATH, without a path lookup; on a kernel before 6.6 (ENOSYS,
    /// EINVAL) through the descriptor's /proc/self/fd path instead.
    /// - Throws: the call's `Errno` (EPERM, EROFS, EOPNOTSUPP for a symlink).
    public static func chmod(fd: Int32, mode: mode_t) throws(Errno) {
        if mamfs_fchmodat2_empty(fd, UInt32(mode)) == 0 { return }
        guard errno == ENOSYS || errno == EINVAL else { throw Errno.current }
        var st = Glibc.stat()
        guard fstatat(fd, "", &st, SystemConstants.emptyPath) == 0 else { throw Errno.current }
        // Through /proc a symlink's target would be changed; the call says no as fchmodat2 does.
        guard st.st_mode & S_IFMT != S_IFLNK else { throw Errno(rawValue: EOPNOTSUPP) }
        guard Glibc.chmod(ProcessDescriptorPath.path(of: fd), mode) == 0 else { throw Errno.current }
    }

    /// utimensat of what `fd` (also an O_PATH descriptor) refers to, itself (a symlink's own
    /// times): `times` are access and modification time (UTIME_NOW, UTIME_OMIT as utimensat
    /// takes them), set with AT_EMPTY_PATH, without a path lookup; where the kernel refuses
    /// that (EINVAL, ENOENT), through the descriptor's /proc/self/fd path (not for a symlink).
    /// - Throws: the call's `Errno` (EPERM, EACCES, EROFS).
    public static func setTimes(fd: Int32, _ times: (timespec, timespec)) throws(Errno) {
        var both = [times.0, times.1]
        if utimensat(fd, "", &both, SystemConstants.emptyPath) == 0 { return }
        guard errno == EINVAL || errno == ENOENT else { throw Errno.current }
        let failure = Errno.current
        var st = Glibc.stat()
        guard fstatat(fd, "", &st, SystemConstants.emptyPath) == 0, st.st_mode & S_IFMT != S_IFLNK else { throw failure }
        guard utimensat(AT_FDCWD, ProcessDescriptorPath.path(of: fd), &both, 0) == 0 else { throw Errno.current }
    }

    /// Attributes of `name` in the directory `directory` (AT_FDCWD for the working directory);
    /// a final symlink is not followed unless `followSymlink`.
    public static func stat(in directory: Int32, _ name: UnsafePointer<CChar>, followSymlink: Bool = false) throws(Errno) -> stat {
        var st = Glibc.stat()
        guard fstatat(directory, name, &st, followSymlink ? 0 : AT_SYMLINK_NOFOLLOW) == 0 else { throw Errno.current }
        return st
    }

    /// fallocate(2) of `length` bytes at `offset`, retrying EINTR; `mode` is 0 or
    /// `SystemConstants.fallocate*` flags.
    public static func fallocate(fd: Int32, mode: Int32, offset: Int64, length: Int64) throws(Errno) {
        while mamfs_fallocate(fd, mode, offset, length) != 0 {
            if errno == EINTR { continue }
            throw Errno.current
        }
    }

    /// sync_file_range(2) with SYNC_FILE_RANGE_WRITE: starts writing the dirty pages of `fd` in
    /// bytes `offset ..< offset+length` to the disk and returns without waiting (it may block
    /// while the device's queue is full). Durability still needs fsync: no metadata is written.
    /// - Throws: the call's `Errno` (EBADF, EINVAL, EIO, ENOSPC, ESPIPE).
    public static func startWriteback(fd: Int32, offset: Int64, length: Int64) throws(Errno) {
        guard length > 0 else { return }
        guard mamfs_start_writeback(fd, offset, length) == 0 else { throw Errno.current }
    }

    /// renameat2(2) with `flags` (`SystemConstants.rename*`); plain renameat when `flags` is 0.
    public static func rename(from: Int32, _ fromName: UnsafePointer<CChar>, to: Int32, _ toName: UnsafePointer<CChar>, flags: UInt32) throws(Errno) {
        let rc = flags == 0 ? renameat(from, fromName, to, toName) : mamfs_renameat2(from, fromName, to, toName, flags)
        guard rc == 0 else { throw Errno.current }
    }

    /// syncfs(2): writes back everything dirty of the filesystem holding `fd` (data, inodes,
    /// directory entries, the journal) and waits for it; one call in place of an fsync per file
    /// and directory. `fd` must be opened for reading or writing (an O_PATH descriptor is EBADF).
    /// - Throws: the call's `Errno`: EIO, ENOSPC, EDQUOT when writeback failed since `fd` was
    ///   opened (reported from Linux 5.8 on), EBADF.
    public static func syncFilesystem(fd: Int32) throws(Errno) {
        guard syncfs(fd) == 0 else { throw Errno.current }
    }

    /// close_range(2): closes descriptors `first...last` (Linux 5.9+; ENOSYS before).
    public static func closeRange(_ first: UInt32, _ last: UInt32, flags: UInt32 = 0) throws(Errno) {
        guard mamfs_close_range(first, last, flags) == 0 else { throw Errno.current }
    }

    /// Closes a descriptor this code owns as a raw value; EINTR is not retried (Linux has
    /// released the descriptor already).
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }
}
