import CSystem
import Glibc

/// Extended attributes of one file, named by path (following or not following a final
/// symlink), by descriptor, or by a descriptor's /proc/self/fd path (the way to reach the
/// attributes of an O_PATH descriptor). Values are read into a buffer that grows on ERANGE,
/// so any size the filesystem allows comes back whole.
public struct ExtendedAttributes: Sendable {
    private enum Target: Sendable {
        case path(String, followSymlink: Bool)
        case descriptor(Int32)
    }

    private let target: Target

    /// The attributes of what `path` names; a final symlink is followed unless `followSymlink`
    /// is false (the l-variants: lgetxattr, lsetxattr, ...).
    public init(path: String, followSymlink: Bool = true) {
        target = .path(path, followSymlink: followSymlink)
    }

    /// The attributes of the file open as `fd` (f-variants; not usable on O_PATH descriptors).
    public init(descriptor fd: Int32) { target = .descriptor(fd) }

    /// The attributes of the file open as `fd` through its /proc/self/fd path, which also
    /// works for O_PATH descriptors (needs /proc).
    public init(descriptorPath fd: Int32) {
        target = .path(ProcessDescriptorPath.path(of: fd), followSymlink: true)
    }

    /// The value of attribute `name` as its exact bytes.
    /// - Returns: nil when the file has no such attribute (ENODATA).
    /// - Throws: other errors (ENOTSUP, EACCES, ENOENT, ...).
    public func get(_ name: String) throws(Errno) -> [UInt8]? {
        try name.withCString { cName in Self.result { () throws(Errno) in try get(cName: cName) } }.get()
    }

    /// `get` for a name given as the kernel's bytes (NUL-terminated; need not be UTF-8).
    public func get(cName name: UnsafePointer<CChar>) throws(Errno) -> [UInt8]? {
        do throws(Errno) {
            return try Self.grow { buffer in
                switch target {
                case .path(let path, true): return getxattr(path, name, buffer.baseAddress, buffer.count)
                case .path(let path, false): return lgetxattr(path, name, buffer.baseAddress, buffer.count)
                case .descriptor(let fd): return fgetxattr(fd, name, buffer.baseAddress, buffer.count)
                }
            }
        } catch where error == .noData {
            return nil
        }
    }

    /// The value of attribute `name` decoded as UTF-8 (invalid bytes replaced); nil when missing.
    public func string(_ name: String) throws(Errno) -> String? {
        try get(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Sets attribute `name` to `value`; `flags` is 0, XATTR_CREATE or XATTR_REPLACE.
    public func set(_ name: String, _ value: [UInt8], flags: Int32 = 0) throws(Errno) {
        try value.withUnsafeBytes { bytes in
            name.withCString { cName in Self.result { () throws(Errno) in try set(cName: cName, bytes, flags: flags) } }
        }.get()
    }

    /// `set` for a name given as the kernel's bytes and a value in a raw buffer.
    public func set(cName name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, flags: Int32 = 0) throws(Errno) {
        let rc: Int32
        switch target {
        case .path(let path, true): rc = setxattr(path, name, value.baseAddress, value.count, flags)
        case .path(let path, false): rc = lsetxattr(path, name, value.baseAddress, value.count, flags)
        case .descriptor(let fd): rc = fsetxattr(fd, name, value.baseAddress, value.count, flags)
        }
        guard rc == 0 else { throw Errno.current }
    }

    /// Sets attribute `name` to the UTF-8 bytes of `value`.
    public func set(_ name: String, string value: String, flags: Int32 = 0) throws(Errno) {
        try set(name, Array(value.utf8), flags: flags)
    }

    /// Removes attribute `name`.
    /// - Throws: ENODATA when there is none, or the call's other errors.
    public func remove(_ name: String) throws(Errno) {
        try name.withCString { cName in Self.result { () throws(Errno) in try remove(cName: cName) } }.get()
    }

    /// `remove` for a name given as the kernel's bytes.
    public func remove(cName name: UnsafePointer<CChar>) throws(Errno) {
        let rc: Int32
        switch target {
        case .path(let path, true): rc = removexattr(path, name)
        case .path(let path, false): rc = lremovexattr(path, name)
        case .descriptor(let fd): rc = fremovexattr(fd, name)
        }
        guard rc == 0 else { throw Errno.current }
    }

    /// The names of all attributes the caller may see, in the kernel's order.
    public func names() throws(Errno) -> [String] {
        try nameBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// `names()` as the kernel's bytes, without their NULs (a name need not be UTF-8).
    public func nameBytes() throws(Errno) -> [ArraySlice<UInt8>] {
        let list = try Self.grow { buffer in
            let chars = buffer.baseAddress?.assumingMemoryBound(to: CChar.self)
            switch target {
            case .path(let path, true): return listxattr(path, chars, buffer.count)
            case .path(let path, false): return llistxattr(path, chars, buffer.count)
            case .descriptor(let fd): return flistxattr(fd, chars, buffer.count)
            }
        }
        return list.split(separator: 0)
    }

    /// The outcome of `body` as a value, so it can cross a non-throwing closure (withCString).
    private static func result<T>(_ body: () throws(Errno) -> T) -> Result<T, Errno> {
        do throws(Errno) { return .success(try body()) } catch { return .failure(error) }
    }

    /// Runs a get/list call with a buffer that grows until the value fits: on ERANGE the
    /// size is asked (a zero-length call) and the call repeated, as the value may change
    /// between the two calls.
    private static func grow(_ call: (UnsafeMutableRawBufferPointer) -> Int) throws(Errno) -> [UInt8] {
        var capacity = 256
        while true {
            var buffer = [UInt8](repeating: 0, count: capacity)
            let n = buffer.withUnsafeMutableBytes { call($0) }
            if n >= 0 {
                buffer.removeSubrange(n...)
                return buffer
            }
            let failure = Errno.current
            guard failure == .outOfRange else { throw failure }
            let needed = call(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            if needed < 0 { throw Errno.current }
            capacity = max(needed, capacity * 2)
        }
    }
}
