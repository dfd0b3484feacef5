import CSystem
import Foundation
import MAMProtection

/// A directory that every file operation of the providers below it goes through by
/// descriptor, so nothing below can lead an operation outside it.
///
/// Relative paths ("a/b/c", "" = the directory itself) are resolved with
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it (Linux 5.6+), else
/// by a walk from the directory's descriptor that opens each component with
/// `O_NOFOLLOW | O_DIRECTORY`. Either way a symlink anywhere in the path (the last component
/// included, unless the operation acts on the link itself: lstat, unlink, rename, readlink) and
/// a ".." or absolute path fail with `ELOOP` / `EXDEV` / `ENOENT`; nothing is followed. Every
/// operation then acts with the `*at` call on the parent's descriptor, so a parent swapped for a
/// symlink between two calls is never crossed either.
///
/// Opening a file for its contents checks its type first (`fstatat` without following, then
/// `O_NONBLOCK` open and `fstat` of the descriptor): a FIFO, socket or device is refused with
/// `EINVAL` without blocking or touching it.
///
/// Calls return what the POSIX call they wrap returns (`-1` / nil with `errno` set), so call
/// sites read like the path-based code they replace. Thread-safe: the root descriptor is
/// only read after `init`.
final class ConfinedDirectory: @unchecked Sendable {
    /// The directory as given (for messages).
    let path: String
    /// O_PATH descriptor of the directory.
    let descriptor: Int32
    /// False: always resolve by the descriptor walk (what kernels without openat2 get).
    private let tryOpenat2: Bool

    /// Opens `path` (following a symlink in `path` itself: the caller chose it).
    /// - Parameter useOpenat2: false to resolve by the descriptor walk only (tests of the
    ///   fallback).
    /// - Throws: `MAMError.system` with the errno (ENOENT, ENOTDIR, EACCES ...).
    init(path: String, useOpenat2: Bool = true) throws {
        self.path = path
        tryOpenat2 = useOpenat2
        let fd = Glibc.open(path, mamfs_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(path)") }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// The components of a relative path, nil (with `errno` = ENOENT) for one that is absolute
    /// or holds "", "." or ".." components.
    static func components(_ relative: String) -> [String]? {
        if relative.isEmpty { return [] }
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard !relative.hasPrefix("/"), !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            errno = ENOENT
            return nil
        }
        return parts
    }

    /// `directory/name`, or `name` for the top ("").
    static func child(_ directory: String, _ name: String) -> String {
        directory.isEmpty ? name : directory + "/" + name
    }

    private static let openat2Missing = Atomic()

    /// Opens `relative` below the directory without following any symlink.
    /// - Parameters:
    ///   - flags: open(2) flags (O_CLOEXEC is always added; O_NOFOLLOW is implied).
    ///   - mode: for O_CREAT.
    /// - Returns: the descriptor, or -1 with `errno`.
    func open(_ relative: String, _ flags: Int32, mode: mode_t = 0) -> Int32 {
        guard let parts = Self.components(relative) else { return -1 }
        if parts.isEmpty { return openat(descriptor, ".", flags | O_CLOEXEC, mode) }
        var fd: Int32 = -1
        var resolved = false
        if tryOpenat2 && !Self.openat2Missing.isSet {
            fd = mamfs_openat2_beneath(descriptor, relative, flags | O_CLOEXEC | O_NOFOLLOW, mode)
            resolved = fd >= 0 || (errno != ENOSYS && errno != EPERM)
            if !resolved && errno == ENOSYS { Self.openat2Missing.set() }
        }
        if !resolved { fd = walk(parts, flags, mode) }
        // O_PATH | O_NOFOLLOW gives a descriptor of a trailing symlink itself (openat2 too):
        // refused like every other symlink.
        if fd >= 0, (flags & mamfs_O_PATH) != 0 {
            var st = stat()
            if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK {
                close(fd)
                errno = ELOOP
                return -1
            }
        }
        return fd
    }

    /// The fallback of `open`: one component at a time from the directory's descriptor.
    private func walk(_ parts: [String], _ flags: Int32, _ mode: mode_t) -> Int32 {
        var current = descriptor
        var owned = false
        defer { if owned { let saved = errno; close(current); errno = saved } }
        for part in parts.dropLast() {
            let next = openat(current, part, mamfs_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else {
                if errno == ENOTDIR, isSymlink(at: current, part) { errno = ELOOP }
                return -1
            }
            if owned { close(current) }
            current = next
            owned = true
        }
        guard let last = parts.last else { return -1 }
        return openat(current, last, flags | O_NOFOLLOW | O_CLOEXEC, mode)
    }

    private func isSymlink(at directory: Int32, _ name: String) -> Bool {
        var st = stat()
        return fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == S_IFLNK
    }

    /// Runs `body` with an O_PATH descriptor of the parent of `relative` and its last name.
    /// - Returns: what `body` returns, or `failure` with `errno` set when the parent cannot be
    ///   opened (a missing, non-directory or symlinked parent) or `relative` is the directory.
    func withParent<T>(_ relative: String, failure: T, _ body: (Int32, String) -> T) -> T {
        guard let parts = Self.components(relative), let name = parts.last else {
            if relative.isEmpty { errno = EINVAL }
            return failure
        }
        let parent = parts.dropLast().joined(separator: "/")
        if parent.isEmpty { return body(descriptor, name) }
        let fd = open(parent, mamfs_O_PATH | O_DIRECTORY)
        guard fd >= 0 else {
            // A parent that is a symlink: reported as one, not as "not a directory".
            if errno == ENOTDIR { errno = lstat(parent).map(FileSystem.isSymlink) == true ? ELOOP : ENOTDIR }
            return failure
        }
        defer { let saved = errno; close(fd); errno = saved }
        return body(fd, name)
    }

    // MARK: POSIX calls below the directory

    /// `lstat`: never follows a symlink (the last component may be one).
    func lstat(_ relative: String) -> stat? {
        var st = stat()
        if relative.isEmpty { return fstat(descriptor, &st) == 0 ? st : nil }
        return withParent(relative, failure: nil) { fd, name in
            fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st : nil
        }
    }

    func mkdir(_ relative: String, _ mode: mode_t) -> Int32 {
        withParent(relative, failure: -1) { mkdirat($0, $1, mode) }
    }

    /// Creates `relative` and its missing parents as directories (0755).
    /// - Throws: `.cannotCreateOutput` (also for a component that is a symlink or a file).
    func makeDirectories(_ relative: String) throws {
        guard let parts = Self.components(relative) else {
            throw MAMError.cannotCreateOutput("\(relative) is not a relative path")
        }
        var done = ""
        for part in parts {
            done = done.isEmpty ? part : done + "/" + part
            if mkdir(done, 0o755) != 0 && errno != EEXIST {
                throw MAMError.cannotCreateOutput("cannot create directory \(done): \(String(cString: strerror(errno)))")
            }
            guard let st = lstat(done), FileSystem.isDirectory(st) else {
                throw MAMError.cannotCreateOutput("\(done) exists and is not a directory")
            }
        }
    }

    func symlink(_ target: String, _ relative: String) -> Int32 {
        withParent(relative, failure: -1) { symlinkat(target, $0, $1) }
    }

    func unlink(_ relative: String) -> Int32 {
        withParent(relative, failure: -1) { unlinkat($0, $1, 0) }
    }

    func rmdir(_ relative: String) -> Int32 {
        withParent(relative, failure: -1) { unlinkat($0, $1, AT_REMOVEDIR) }
    }

    /// `renameat2` between two paths below the directory (neither is followed).
    func rename(_ from: String, _ to: String, flags: UInt32 = 0) -> Int32 {
        withParent(from, failure: -1) { fromFD, fromName in
            withParent(to, failure: -1) { toFD, toName in
                mamfs_renameat2(fromFD, fromName, toFD, toName, flags)
            }
        }
    }

    /// The target of the symlink `relative`, nil on error (not a symlink: EINVAL).
    func readLink(_ relative: String) -> String? {
        withParent(relative, failure: nil) { fd, name in
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlinkat(fd, name, &buffer, buffer.count - 1)
            guard n >= 0 else { return nil }
            return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// fsyncs the directory `relative` (makes a rename in it durable; errors are ignored: some
    /// filesystems cannot fsync directories).
    func syncDirectory(_ relative: String) {
        let fd = open(relative, O_RDONLY | O_DIRECTORY)
        if fd >= 0 { _ = fsync(fd); close(fd) }
    }

    /// Opens the regular file (or, with `directory`, the directory) `relative` for its
    /// contents or attributes, after checking its type without opening it, then again on the
    /// descriptor. A FIFO, socket, device or symlink is refused (EINVAL / ELOOP) without
    /// blocking. O_NONBLOCK is cleared on the returned descriptor.
    /// - Returns: the descriptor, or -1 with `errno` (ENOENT, EINVAL, ELOOP, ...).
    func openExisting(_ relative: String, _ flags: Int32, directory: Bool = false) -> Int32 {
        let wanted: mode_t = directory ? Glibc.S_IFDIR : Glibc.S_IFREG
        if !relative.isEmpty {
            guard let st = lstat(relative) else { return -1 }
            guard (st.st_mode & S_IFMT) == wanted else {
                errno = (st.st_mode & S_IFMT) == S_IFLNK ? ELOOP : (directory ? ENOTDIR : EINVAL)
                return -1
            }
        }
        let fd = open(relative, flags | O_NONBLOCK | (directory ? O_DIRECTORY : 0))
        guard fd >= 0 else { return -1 }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == wanted else {
            close(fd)
            errno = directory ? ENOTDIR : EINVAL
            return -1
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    /// The names in the directory `relative` ("." and ".." left out). A name that is not
    /// valid UTF-8 cannot be named without merging it with another one: it is left out and
    /// passed to `invalid` (its bytes shown escaped).
    /// - Returns: the names, nil with `errno` when the directory cannot be opened.
    func names(in relative: String, invalid: (String) -> Void = { _ in }) -> [String]? {
        let fd = openExisting(relative, O_RDONLY, directory: true)
        guard fd >= 0 else { return nil }
        guard let dir = fdopendir(fd) else { close(fd); return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            guard let name = ExactName.decode(bytes) else {
                invalid(ExactName.escaped(bytes))
                continue
            }
            names.append(name)
        }
        return names
    }

    /// Runs `body` with a path that names the regular file or directory `relative` through an
    /// O_PATH descriptor (`/proc/self/fd/N`): extended attributes are read and written there
    /// without following a symlink, without opening a special file and without needing read
    /// permission on the file (a 0200 file of a non-root daemon).
    /// - Returns: what `body` returns, `failure` with `errno` (ELOOP, EINVAL for a special file).
    func withAttributePath<T>(_ relative: String, failure: T, _ body: (String) -> T) -> T {
        let fd = open(relative, mamfs_O_PATH)
        guard fd >= 0 else { return failure }
        defer { let saved = errno; close(fd); errno = saved }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return failure }
        guard FileSystem.isRegular(st) || FileSystem.isDirectory(st) else { errno = EINVAL; return failure }
        return body("/proc/self/fd/\(fd)")
    }

    /// An extended attribute of the regular file or directory `relative` (nil for anything
    /// else, a missing attribute or an error).
    func getAttribute(_ relative: String, _ name: String) -> String? {
        withAttributePath(relative, failure: nil) { FileSystem.getAttribute(followingPath: $0, name) }
    }

    /// Sets an extended attribute of the regular file or directory `relative`.
    /// - Throws: `MAMError.system` with the errno.
    func setAttribute(_ relative: String, _ name: String, _ value: String) throws {
        let rc = withAttributePath(relative, failure: -1) { path in
            Array(value.utf8).withUnsafeBytes { setxattr(path, name, $0.baseAddress, $0.count, 0) }
        }
        guard rc == 0 else { throw MAMError.fromErrno("set \(name) on \(relative)") }
    }

    /// Removes every name in `names` from `relative` (errors ignored).
    func removeAttributes(_ relative: String, _ names: [String]) {
        withAttributePath(relative, failure: ()) { path in
            for name in names { _ = removexattr(path, name) }
        }
    }
}

/// A flag set once, read from any thread.
private final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
    func set() { lock.lock(); value = true; lock.unlock() }
}
