import Glibc
import MAMProtection
import MAMSystem
import Synchronization

/// An open regular file: the backing descriptor (O_RDWR whenever the caller may write, so
/// blocks can be read back and merged) and whether the caller asked for O_APPEND (mamfs
/// appends at the plaintext end itself; the backing descriptor never has O_APPEND).
final class OpenFile: KernelHandle, @unchecked Sendable {
    let inode: Inode
    let fd: Int32
    let append: Bool
    let writable: Bool
    /// The backing object the descriptor was opened on.
    let backingKey: BackingKey
    /// The header and key read from `fd` itself, once it was needed (see `detachedContent`).
    private let detached = Mutex<(ProtectedFileHeader?, SymmetricKey?)?>(nil)

    init(inode: Inode, fd: Int32, append: Bool, writable: Bool) {
        self.inode = inode
        self.fd = fd
        self.append = append
        self.writable = writable
        self.backingKey = inode.key
    }

    /// The plaintext view from this descriptor's own header (its entry now names another file).
    func detachedContent(_ keyFor: (ProtectedFileHeader) throws -> SymmetricKey?) throws -> ProtectedFileContent {
        let (header, key) = try detached.withLock { detached throws -> (ProtectedFileHeader?, SymmetricKey?) in
            if let detached { return detached }
            let header = try ProtectedFileHeader.read(fd: fd)
            let pair = (header, try header.flatMap { try keyFor($0) })
            detached = pair
            return pair
        }
        return try ProtectedFileContent(fd: fd, header: header, fileKey: key)
    }

    deinit { SystemCall.close(fd) }
}
