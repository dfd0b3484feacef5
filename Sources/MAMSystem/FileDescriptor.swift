import CSystem
import Glibc

/// An open file descriptor this value owns: it is closed when the value goes out of scope,
/// unless `take()` hands it on. Mirrors swift-system's `FileDescriptor`, but owning and
/// Linux-only. Openers throw the call's `Errno`; flags are passed as given (add O_CLOEXEC).
public struct FileDescriptor: ~Copyable {
    private let fd: Int32

    /// Takes ownership of an open descriptor (`rawValue` >= 0).
    public init(adopting rawValue: Int32) { fd = rawValue }

    deinit { _ = Glibc.close(fd) }

    /// The descriptor number, for calls that take one; it stays owned by this value.
    public var rawValue: Int32 { fd }

    /// Gives up ownership: the descriptor stays open and the caller must close it.
    public consuming func take() -> Int32 {
        let raw = fd
        discard self
        return raw
    }

    // MARK: Opening

    /// open(2) of `path` with `flags` and, for O_CREAT/O_TMPFILE, `mode`.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        let fd = Glibc.open(path, flags, mode)
        guard fd >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: fd)
    }

    /// openat(2) of `name` in the directory `directory` (AT_FDCWD for the working directory).
    public static func open(in directory: Int32, _ name: UnsafePointer<CChar>, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        let fd = Glibc.openat(directory, name, flags, mode)
        guard fd >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: fd)
    }

    /// openat(2) of `name` in the directory `directory` (AT_FDCWD for the working directory).
    public static func open(in directory: Int32, _ name: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        let fd = Glibc.openat(directory, name, flags, mode)
        guard fd >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: fd)
    }

    /// openat(2) of `name` in the open directory `directory`.
    public static func open(in directory: borrowing FileDescriptor, _ name: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        try open(in: directory.rawValue, name, flags, mode: mode)
    }

    /// An O_PATH | O_CLOEXEC descriptor of `path`, plus `flags` (O_DIRECTORY, O_NOFOLLOW).
    public static func openPath(_ path: String, flags: Int32 = 0) throws(Errno) -> FileDescriptor {
        try open(path, SystemConstants.pathOnly | O_CLOEXEC | flags)
    }

    /// An O_PATH | O_CLOEXEC descriptor of `name` in `directory`, plus `flags`.
    public static func openPath(in directory: Int32, _ name: UnsafePointer<CChar>, flags: Int32 = 0) throws(Errno) -> FileDescriptor {
        try open(in: directory, name, SystemConstants.pathOnly | O_CLOEXEC | flags)
    }

    /// An O_PATH | O_CLOEXEC descriptor of `name` in `directory`, plus `flags`.
    public static func openPath(in directory: Int32, _ name: String, flags: Int32 = 0) throws(Errno) -> FileDescriptor {
        try open(in: directory, name, SystemConstants.pathOnly | O_CLOEXEC | flags)
    }

    /// A new open file description of what `fd` refers to (an O_PATH descriptor may be
    /// reopened for reading or writing), through its /proc/self/fd path. Fails with ENOENT
    /// when /proc is not mounted.
    public static func reopen(_ fd: Int32, _ flags: Int32) throws(Errno) -> FileDescriptor {
        try open(ProcessDescriptorPath.path(of: fd), flags)
    }

    /// An O_PATH descriptor of the file open as `fd` (fstat `statted`), which was just made as
    /// `name` in `directory`: opened by name (O_NOFOLLOW) and kept when it names the same file
    /// (device and inode), else reopened through /proc/self/fd (`reopen`). By name skips
    /// procfs's lookup of /proc/self/fd/N, whose entry is made anew for every new descriptor
    /// (about 10 µs less per create in a `tar x` of small files); the check keeps a name swapped
    /// meanwhile from lending another file, and an O_PATH open of whatever the name leads to (a
    /// FIFO, a device) opens nothing.
    /// - Throws: `Errno` of the reopen (ENOENT without /proc).
    public static func pathDescriptor(of fd: Int32, named name: UnsafePointer<CChar>, in directory: Int32,
                                      statted: stat) throws(Errno) -> FileDescriptor {
        let byName = Glibc.openat(directory, name, SystemConstants.pathOnly | O_NOFOLLOW | O_CLOEXEC)
        if byName >= 0 {
            let found = FileDescriptor(adopting: byName)
            if let now = try? found.stat(), now.st_dev == statted.st_dev, now.st_ino == statted.st_ino { return found }
        }
        return try reopen(fd, SystemConstants.pathOnly | O_CLOEXEC)
    }

    /// openat2(2) of `path` in `directory` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no
    /// symlink is crossed and no component leaves the directory. O_CLOEXEC is added.
    /// - Throws: ENOSYS on kernels before 5.6, EXDEV for an escape, ELOOP for a symlink.
    public static func openBeneath(_ directory: Int32, _ path: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        let fd = mamfs_openat2_beneath(directory, path, flags | O_CLOEXEC, UInt32(mode))
        guard fd >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: fd)
    }

    /// An anonymous memory file (memfd_create with MFD_CLOEXEC), read-write, size 0. `name`
    /// only shows in /proc.
    public static func memoryFile(name: String) throws(Errno) -> FileDescriptor {
        let fd = mamfs_memfd_create(name)
        guard fd >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: fd)
    }

    /// dup(2) with close-on-exec.
    public borrowing func duplicate() throws(Errno) -> FileDescriptor {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: copy)
    }

    // MARK: I/O

    /// Attributes of the open file (works for O_PATH descriptors too).
    public borrowing func stat() throws(Errno) -> stat { try SystemCall.stat(fd: fd) }

    /// Size of the open file in bytes.
    public borrowing func size() throws(Errno) -> Int64 { Int64(try SystemCall.stat(fd: fd).st_size) }

    /// Reads up to `buffer.count` bytes at byte `offset`, short only at end of file.
    /// - Returns: bytes read.
    public borrowing func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try SystemCall.pread(fd: fd, into: buffer, at: offset)
    }

    /// Writes all of `buffer` at byte `offset`.
    public borrowing func pwrite(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        try SystemCall.pwrite(fd: fd, buffer, at: offset)
    }

    /// fsync(2).
    public borrowing func sync() throws(Errno) {
        guard fsync(fd) == 0 else { throw Errno.current }
    }
}
