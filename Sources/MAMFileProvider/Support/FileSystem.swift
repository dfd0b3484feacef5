import Foundation
import MAMProtection
import MAMSystem

/// Small POSIX helpers shared by the remote store and the providers: stat, byte copies,
/// extended attributes, directory fsync. Failures come back as errno values or `MAMError`.
enum FileSystem {
    /// `lstat`, or nil with `errno` set.
    static func lstatPath(_ path: String) -> stat? {
        var st = stat()
        return lstat(path, &st) == 0 ? st : nil
    }

    static func isDirectory(_ st: stat) -> Bool { (st.st_mode & S_IFMT) == S_IFDIR }
    static func isRegular(_ st: stat) -> Bool { (st.st_mode & S_IFMT) == S_IFREG }
    static func isSymlink(_ st: stat) -> Bool { (st.st_mode & S_IFMT) == S_IFLNK }

    /// Modification time in nanoseconds since the epoch.
    static func mtimeNanoseconds(_ st: stat) -> Int64 {
        Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
    }

    /// The node type of a stat result, nil for fifos, sockets and devices.
    static func itemType(_ st: stat) -> ItemType? {
        switch st.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        case S_IFLNK: return .symlink
        default: return nil
        }
    }

    /// The target of the symlink at `path`, nil on error.
    static func readLink(_ path: String) -> String? {
        try? SymbolicLink.readLinkString(path)
    }

    /// Copies every byte of `source` (from offset `from`) to `destination` (at offset `at`),
    /// then truncates `destination` to end there.
    /// - Returns: bytes copied.
    /// - Throws: `MAMError.system` with the failing errno.
    @discardableResult
    static func copyBytes(from source: Int32, offset from: Int64 = 0, to destination: Int32, at start: Int64 = 0) throws -> Int64 {
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        guard let base = buffer.baseAddress else { return 0 }
        var readOffset = from
        var written: Int64 = 0
        while true {
            let n = pread(source, base, size, off_t(readOffset))
            if n < 0 {
                if errno == EINTR { continue }
                throw MAMError.fromErrno("read")
            }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = pwrite(destination, base + done, n - done, off_t(start + written + Int64(done)))
                if w < 0 {
                    if errno == EINTR { continue }
                    throw MAMError.fromErrno("write")
                }
                done += w
            }
            readOffset += Int64(n)
            written += Int64(n)
        }
        guard ftruncate(destination, off_t(start + written)) == 0 else { throw MAMError.fromErrno("truncate") }
        return written
    }

    /// `copyBytes` of a whole file from offset 0 to offset 0, in the kernel (sendfile(2): no
    /// buffer, no copy through this process) where it can, else through a buffer.
    /// - Returns: bytes copied.
    /// - Throws: `MAMError.system` with the failing errno.
    @discardableResult
    static func transferBytes(from source: Int32, to destination: Int32) throws -> Int64 {
        var offset: off_t = 0
        while true {
            let n = sendfile(destination, source, &offset, 1 << 30)
            if n > 0 { continue }
            if n == 0 { break }
            if errno == EINTR { continue }
            if offset == 0 && (errno == EINVAL || errno == ENOSYS) {
                return try copyBytes(from: source, to: destination)
            }
            throw MAMError.fromErrno("read")
        }
        guard ftruncate(destination, offset) == 0 else { throw MAMError.fromErrno("truncate") }
        return Int64(offset)
    }

    /// open(2) of `path` with `flags` (add O_CLOEXEC), as a descriptor closed with the value.
    /// - Throws: `MAMError.system("open PATH")` with the errno.
    static func openFile(_ path: String, _ flags: Int32) throws -> FileDescriptor {
        do {
            return try FileDescriptor.open(path, flags)
        } catch {
            throw MAMError.system("open \(path)", errno: error.rawValue)
        }
    }

    /// True when the file at `path` starts with the protected-file magic.
    static func startsWithMagic(_ path: String) -> Bool {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) else { return false }
        return startsWithMagic(fd: file.rawValue)
    }

    /// True when the open file starts with the protected-file magic.
    static func startsWithMagic(fd: Int32) -> Bool {
        var prefix = [UInt8](repeating: 0, count: ProtectedFileHeader.magic.count)
        guard let n = try? prefix.withUnsafeMutableBytes({ bytes in try SystemCall.pread(fd: fd, into: bytes, at: 0) }) else {
            return false
        }
        return prefix[0..<n].withUnsafeBytes { ProtectedFileHeader.hasMagic($0) }
    }

    /// The mkostemp template of a temp file for `name` in `directory`:
    /// `DIR/.NAME.mamfs-tmp-XXXXXX` (the name cut to 80 characters, "item" when empty).
    static func temporaryTemplate(in directory: String, name: String) -> String {
        let base = name.isEmpty ? "item" : String(name.prefix(80))
        return directory + "/.\(base).mamfs-tmp-XXXXXX"
    }

    /// True for the names of temp files made by mamfs (skipped when trees are walked).
    static func isTemporaryName(_ name: String) -> Bool {
        name.hasPrefix(".") && name.contains(".mamfs-tmp-")
    }

    // MARK: Extended attributes

    /// An extended attribute of `path` itself (a symlink is not followed), nil when missing.
    static func getAttribute(_ path: String, _ name: String) -> String? {
        (try? ExtendedAttributes(path: path, followSymlink: false).string(name)) ?? nil
    }

    static func setAttribute(fd: Int32, _ name: String, _ value: String) throws {
        do {
            try ExtendedAttributes(descriptor: fd).set(name, string: value)
        } catch {
            throw MAMError.system("set \(name)", errno: error.rawValue)
        }
    }

    /// Creates `path` and its missing parents as directories (0755).
    static func makeDirectories(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw MAMError.cannotCreateOutput("cannot create directory \(path)")
        }
    }

    /// Joins a root and a relative path ("" or "." = the root).
    static func join(_ root: String, _ relative: String) -> String {
        if relative.isEmpty || relative == "." { return root }
        return root + "/" + relative
    }

    /// `a/b/c` -> `c`.
    static func lastComponent(_ relative: String) -> String {
        guard let slash = relative.lastIndex(of: "/") else { return relative }
        return String(relative[relative.index(after: slash)...])
    }

    /// Number of components (depth) of a relative path.
    static func depth(_ relative: String) -> Int {
        // The non-empty components, counted on the bytes (this runs in sort comparisons).
        var count = 0
        var previous = UInt8(ascii: "/")
        for byte in relative.utf8 {
            if byte != UInt8(ascii: "/") && previous == UInt8(ascii: "/") { count += 1 }
            previous = byte
        }
        return count
    }

    /// 64-bit FNV-1a of the UTF-8 bytes, as 16 hex digits (not cryptographic: a version tag).
    static func fnv1a(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
