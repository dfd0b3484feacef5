import Glibc

/// An errno value from a failed system call, as a typed error (mirrors swift-system's `Errno`).
public struct Errno: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The errno number (`ENOENT`, `EACCES`, ...).
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno right now; read it straight after the failing call.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// The text strerror gives for the value ("No such file or directory").
    public var description: String { String(cString: strerror(rawValue)) }

    public static let notPermitted = Errno(rawValue: EPERM)
    public static let noSuchFile = Errno(rawValue: ENOENT)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let ioError = Errno(rawValue: EIO)
    public static let badDescriptor = Errno(rawValue: EBADF)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let isDirectory = Errno(rawValue: EISDIR)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let outOfRange = Errno(rawValue: ERANGE)
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    public static let noData = Errno(rawValue: ENODATA)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    public static let noSystemCall = Errno(rawValue: ENOSYS)
    public static let crossDevice = Errno(rawValue: EXDEV)
}
