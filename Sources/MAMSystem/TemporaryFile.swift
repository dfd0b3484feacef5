import CSystem
import Glibc

/// Temp files: unnamed ones (O_TMPFILE) linked into a directory only when complete, and
/// named 0600 ones (mkostemp) where the filesystem has no O_TMPFILE. Policy (fsync, rename,
/// directory fsync) is the caller's.
public enum TemporaryFile {
    /// An unnamed regular file in the directory `directory`, open with `flags` (O_RDWR or
    /// O_WRONLY; O_CLOEXEC is added) and `mode`. Nothing appears in the directory until
    /// `publish` links it; closed unpublished, the kernel frees it.
    /// - Throws: EOPNOTSUPP (or EISDIR on kernels that predate O_TMPFILE) where the filesystem
    ///   has none (see `isUnavailable`), or the usual open errors.
    public static func createUnnamed(in directory: Int32, flags: Int32 = O_RDWR, mode: mode_t = 0o600) throws(Errno) -> FileDescriptor {
        try FileDescriptor.open(in: directory, ".", SystemConstants.temporaryFile | flags | O_CLOEXEC, mode: mode)
    }

    /// Whether `error` from `createUnnamed` means "no O_TMPFILE here" (use a named temp file).
    public static func isUnavailable(_ error: Errno) -> Bool {
        error == .notSupported || error == .isDirectory
    }

    /// Links the unnamed file open as `fd` into `directory` as `name`: through its
    /// /proc/self/fd path (allowed for any user), else with AT_EMPTY_PATH (needs
    /// CAP_DAC_READ_SEARCH) when /proc is not mounted.
    /// - Throws: EEXIST when `name` exists (linkat never replaces), or the link's other errors.
    public static func publish(_ fd: Int32, in directory: Int32, as name: String) throws(Errno) {
        if linkat(AT_FDCWD, ProcessDescriptorPath.path(of: fd), directory, name, AT_SYMLINK_FOLLOW) == 0 { return }
        guard errno == ENOENT else { throw Errno.current }
        guard linkat(fd, "", directory, name, SystemConstants.emptyPath) == 0 else { throw Errno.current }
    }

    /// A named temp file from `template`, a path ending in "XXXXXX" that mkostemp fills in:
    /// created 0600, open read-write with O_CLOEXEC.
    /// - Returns: the open file and the path made.
    public static func createNamed(template: String) throws(Errno) -> NamedTemporaryFile {
        var bytes = Array(template.utf8CString)
        let fd = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            guard let address = buffer.baseAddress else { return -1 }
            return mamfs_mkostemp(address)
        }
        guard fd >= 0 else { throw Errno.current }
        let descriptor = FileDescriptor(adopting: fd)
        _ = fchmod(fd, 0o600)
        let path = String(decoding: bytes.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return NamedTemporaryFile(descriptor: descriptor, path: path)
    }
}
