import Glibc

/// Reading symlink targets with a buffer that grows until the whole target fits (no PATH_MAX
/// assumption: targets of any length the filesystem stores come back whole).
public enum SymbolicLink {
    /// The target of the symlink `path` as its exact bytes (no NUL).
    /// - Throws: EINVAL when `path` is not a symlink, ENOENT, EACCES, ...
    public static func readLink(_ path: String) throws(Errno) -> [UInt8] {
        try grow { readlink(path, $0, $1) }
    }

    /// The target of the symlink `name` in the directory `directory` (AT_FDCWD for the
    /// working directory; "" with an O_PATH descriptor of the link itself).
    public static func readLink(atFD directory: Int32, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
        try grow { readlinkat(directory, name, $0, $1) }
    }

    /// The target of the symlink `name` in the directory `directory`.
    public static func readLink(atFD directory: Int32, name: String) throws(Errno) -> [UInt8] {
        try grow { readlinkat(directory, name, $0, $1) }
    }

    /// The target of the symlink `path` decoded as UTF-8 (invalid bytes replaced).
    public static func readLinkString(_ path: String) throws(Errno) -> String {
        String(decoding: try readLink(path), as: UTF8.self)
    }

    /// The target of the symlink `name` in `directory`, decoded as UTF-8 (invalid bytes replaced).
    public static func readLinkString(atFD directory: Int32, name: String) throws(Errno) -> String {
        String(decoding: try readLink(atFD: directory, name: name), as: UTF8.self)
    }

    /// readlink fills the buffer without saying whether the target was cut: a result that
    /// fills it is retried with a buffer twice as large.
    private static func grow(_ call: (UnsafeMutablePointer<CChar>, Int) -> Int) throws(Errno) -> [UInt8] {
        var capacity = 256
        while true {
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: capacity)
            defer { buffer.deallocate() }
            let n = call(buffer, capacity)
            guard n >= 0 else { throw Errno.current }
            if n < capacity {
                return UnsafeRawBufferPointer(start: buffer, count: n).map { $0 }
            }
            capacity *= 2
        }
    }
}
