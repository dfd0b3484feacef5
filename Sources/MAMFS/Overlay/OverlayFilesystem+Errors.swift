import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// An errno to answer a request with.
struct FilesystemError: Error {
    let code: Int32
    static func current() -> FilesystemError { FilesystemError(code: errno) }
}

/// The one mapping of thrown errors to errno.
extension OverlayFilesystem {
    /// The errno for `error`, logging corrupt data and unavailable keys with the backing path
    /// (from `inode`, or `path` when the entry is not in the table yet, as in lookup), one line
    /// per path a minute.
    func errnoCode(_ error: Error, _ inode: Inode?, path: @autoclosure () -> String? = nil) -> Int32 {
        if let error = error as? FilesystemError { return error.code }
        if let error = error as? Errno { return error.rawValue }
        if let error = error as? MAMError {
            switch error {
            case .authenticationFailed, .keyUnavailable:
                let where_ = path() ?? inode.flatMap { try? backingPath($0) } ?? "(unknown path)"
                log("\(where_): \(error)", limitedBy: "unreadable \(where_)")
            default:
                break
            }
            return error.errno
        }
        return EIO
    }

}
