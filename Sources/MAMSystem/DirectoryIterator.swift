import Glibc

/// readdir over a directory descriptor (fdopendir); owns its stream and closes it when the
/// value goes out of scope. "." and ".." are skipped.
public struct DirectoryIterator: ~Copyable {
    private let stream: OpaquePointer

    /// Lists the directory `fd` refers to from its start; `fd` stays open and its position is
    /// untouched (the stream reads a duplicate).
    /// - Throws: ENOTDIR, EBADF, EMFILE, ...
    public init(duplicating fd: Int32) throws(Errno) {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw Errno.current }
        try self.init(adopting: FileDescriptor(adopting: copy))
    }

    /// Lists the directory `descriptor` refers to from its start; the stream takes it over.
    public init(adopting descriptor: consuming FileDescriptor) throws(Errno) {
        let raw = descriptor.rawValue
        guard let stream = fdopendir(raw) else { throw Errno.current }
        _ = descriptor.take()
        rewinddir(stream)
        self.stream = stream
    }

    deinit { closedir(stream) }

    /// The next entry, nil at the end.
    /// - Throws: the error readdir reported (EIO, ...).
    public mutating func next() throws(Errno) -> DirectoryEntry? {
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw Errno.current }
                return nil
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: UInt8.self, capacity: Int(NAME_MAX) + 1) { pointer in
                    Array(UnsafeBufferPointer(start: pointer, count: strlen(UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))))
                }
            }
            let result = DirectoryEntry(name: name, type: entry.pointee.d_type, inode: UInt64(entry.pointee.d_ino))
            if !result.isDotOrDotDot { return result }
        }
    }

    /// Every remaining entry.
    public mutating func all() throws(Errno) -> [DirectoryEntry] {
        var entries: [DirectoryEntry] = []
        while let entry = try next() { entries.append(entry) }
        return entries
    }
}
