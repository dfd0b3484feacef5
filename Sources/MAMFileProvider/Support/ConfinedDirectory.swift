import Foundation
import MAMProtection
import MAMSystem

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
public final class ConfinedDirectory: @unchecked Sendable {
    /// The directory as given (for messages).
    public let path: String
    /// O_PATH descriptor of the directory.
    public let descriptor: Int32
    /// False: always resolve by the descriptor walk (what kernels without openat2 get).
    private let tryOpenat2: Bool

    /// Opens `path` (following a symlink in `path` itself: the caller chose it).
    /// - Parameter useOpenat2: false to resolve by the descriptor walk only (tests of the
    ///   fallback).
    /// - Throws: `MAMError.system` with the errno (ENOENT, ENOTDIR, EACCES ...).
    public init(path: String, useOpenat2: Bool = true) throws {
        self.path = path
        tryOpenat2 = useOpenat2
        do {
            descriptor = try FileDescriptor.openPath(path, flags: O_DIRECTORY).take()
        } catch {
            throw MAMError.system("open \(path)", errno: error.rawValue)
        }
    }

    deinit { SystemCall.close(descriptor) }

    /// The components of a relative path, nil (with `errno` = ENOENT) for one that is absolute
    /// or holds "", "." or ".." components.
    /// Split at every "/" byte (never by Characters: "/" and a combining mark after it are one).
    static func components(_ relative: String) -> [String]? {
        if relative.isEmpty { return [] }
        let parts = relative.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false).map { String(Substring($0)) }
        func isDots(_ part: String) -> Bool { part.utf8.elementsEqual(".".utf8) || part.utf8.elementsEqual("..".utf8) }
        guard relative.unicodeScalars.first != "/", !parts.contains(where: { $0.isEmpty || isDots($0) }) else {
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
    public func open(_ relative: String, _ flags: Int32, mode: mode_t = 0) -> Int32 {
        guard let parts = Self.components(relative) else { return -1 }
        if parts.isEmpty { return openat(descriptor, ".", flags | O_CLOEXEC, mode) }
        var fd: Int32 = -1
        var resolved = false
        if tryOpenat2 && !Self.openat2Missing.isSet {
            do {
                fd = try FileDescriptor.openBeneath(descriptor, relative, flags | O_NOFOLLOW, mode: mode).take()
            } catch {
                errno = error.rawValue
            }
            resolved = fd >= 0 || (errno != ENOSYS && errno != EPERM)
            if !resolved && errno == ENOSYS { Self.openat2Missing.set() }
        }
        if !resolved { fd = walk(parts, flags, mode) }
        // O_PATH | O_NOFOLLOW gives a descriptor of a trailing symlink itself (openat2 too):
        // refused like every other symlink.
        if fd >= 0, (flags & SystemConstants.pathOnly) != 0 {
            let opened = FileDescriptor(adopting: fd)
            if let st = try? opened.stat(), (st.st_mode & S_IFMT) == S_IFLNK {
                errno = ELOOP
                return -1
            }
            return opened.take()
        }
        return fd
    }

    /// The fallback of `open`: one component at a time from the directory's descriptor.
    private func walk(_ parts: [String], _ flags: Int32, _ mode: mode_t) -> Int32 {
        var current = descriptor
        var owned = false
        defer { if owned { let saved = errno; close(current); errno = saved } }
        for part in parts.dropLast() {
            let next = openat(current, part, SystemConstants.pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
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
        let fd = open(parent, SystemConstants.pathOnly | O_DIRECTORY)
        guard fd >= 0 else {
            // A parent that is a symlink: reported as one, not as "not a directory".
            if errno == ENOTDIR { errno = lstat(parent).map(FileSystem.isSymlink) == true ? ELOOP : ENOTDIR }
            return failure
        }
        let opened = FileDescriptor(adopting: fd)
        let result = body(opened.rawValue, name)
        let saved = errno
        _ = consume opened
        errno = saved
        return result
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

    /// The birth time of `relative` (not following a final symlink) as "SECONDS.NANOSECONDS",
    /// nil when the filesystem does not record one or it cannot be read. A file made anew
    /// (also one that reuses a freed inode number) has another; a rename keeps it.
    func birthTime(_ relative: String) -> String? {
        withParent(relative, failure: nil) { fd, name in FileIdentity.birthTime(of: name, in: fd) }
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
                do {
                    try SystemCall.rename(from: fromFD, fromName, to: toFD, toName, flags: flags)
                    return 0
                } catch {
                    errno = (error as? Errno)?.rawValue ?? EIO
                    return -1
                }
            }
        }
    }

    /// The target of the symlink `relative`, nil on error (not a symlink: EINVAL).
    func readLink(_ relative: String) -> String? {
        withParent(relative, failure: nil) { fd, name in
            do {
                return try SymbolicLink.readLinkString(atFD: fd, name: name)
            } catch {
                errno = (error as? Errno)?.rawValue ?? EIO
                return nil
            }
        }
    }

    /// fsyncs the directory `relative` (makes a rename in it durable; errors are ignored: some
    /// filesystems cannot fsync directories).
    func syncDirectory(_ relative: String) {
        let fd = open(relative, O_RDONLY | O_DIRECTORY)
        if fd >= 0 { try? FileDescriptor(adopting: fd).sync() }
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
        let opened = FileDescriptor(adopting: fd)
        guard let st = try? opened.stat(), (st.st_mode & S_IFMT) == wanted else {
            errno = directory ? ENOTDIR : EINVAL
            return -1
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return opened.take()
    }

    /// The names in the directory `relative` ("." and ".." left out). A name that is not
    /// valid UTF-8 cannot be named without merging it with another one: it is left out and
    /// passed to `invalid` (its bytes shown escaped).
    /// - Returns: the names, nil with `errno` when the directory cannot be opened.
    func names(in relative: String, invalid: (String) -> Void = { _ in }) -> [String]? {
        let fd = openExisting(relative, O_RDONLY, directory: true)
        guard fd >= 0 else { return nil }
        var iterator: DirectoryIterator
        do {
            iterator = try DirectoryIterator(adopting: FileDescriptor(adopting: fd))
        } catch {
            errno = error.rawValue
            return nil
        }
        var names: [String] = []
        while let entry = try? iterator.next() {
            let bytes = entry.name
            guard let name = ExactName.decode(bytes) else {
                invalid(ExactName.escaped(bytes))
                continue
            }
            names.append(name)
        }
        return names
    }

    /// Runs `body` with an O_PATH descriptor of the regular file or directory `relative`, to be
    /// used through its `ProcessDescriptorPath` (`ExtendedAttributes(descriptorPath:)`): extended attributes are read and written there
    /// without following a symlink, without opening a special file and without needing read
    /// permission on the file (a 0200 file of a non-root daemon).
    /// - Returns: what `body` returns, `failure` with `errno` (ELOOP, EINVAL for a special file).
    func withAttributePath<T>(_ relative: String, failure: T, _ body: (Int32) -> T) -> T {
        let fd = open(relative, SystemConstants.pathOnly)
        guard fd >= 0 else { return failure }
        let opened = FileDescriptor(adopting: fd)
        let result: T
        do {
            let st = try opened.stat()
            guard FileSystem.isRegular(st) || FileSystem.isDirectory(st) else { errno = EINVAL; return failure }
            result = body(opened.rawValue)
        } catch {
            errno = error.rawValue
            return failure
        }
        let saved = errno
        _ = consume opened
        errno = saved
        return result
    }

    /// An extended attribute of the regular file or directory `relative` (nil for anything
    /// else, a missing attribute or an error).
    func getAttribute(_ relative: String, _ name: String) -> String? {
        withAttributePath(relative, failure: nil) { (try? ExtendedAttributes(descriptorPath: $0).string(name)) ?? nil }
    }

    /// Sets an extended attribute of the regular file or directory `relative`.
    /// - Throws: `MAMError.system` with the errno.
    func setAttribute(_ relative: String, _ name: String, _ value: String) throws {
        let rc: Int32 = withAttributePath(relative, failure: -1) { fd in
            do {
                try ExtendedAttributes(descriptorPath: fd).set(name, string: value)
                return 0
            } catch {
                errno = (error as? Errno)?.rawValue ?? EIO
                return -1
            }
        }
        guard rc == 0 else { throw MAMError.fromErrno("set \(name) on \(relative)") }
    }

    /// Removes every name in `names` from `relative` (errors ignored).
    func removeAttributes(_ relative: String, _ names: [String]) {
        withAttributePath(relative, failure: ()) { fd in
            let attributes = ExtendedAttributes(descriptorPath: fd)
            for name in names { try? attributes.remove(name) }
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
