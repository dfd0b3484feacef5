import Foundation
import MAMSystem

/// Whole-buffer positional I/O with EINTR and short-transfer handling.
enum FileIO {
    /// Reads up to `buffer.count` bytes at `offset`, stopping early only at end of file.
    /// - Returns: bytes read.
    static func preadFully(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        do throws(Errno) {
            return try SystemCall.pread(fd: fd, into: buffer, at: offset)
        } catch {
            throw MAMError.system("read", errno: error.rawValue)
        }
    }

    /// Writes all of `buffer` at `offset`.
    /// - Throws: `MAMError.system` with the errno (ENOSPC, EIO, ...).
    static func pwriteFully(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64) throws {
        do throws(Errno) {
            try SystemCall.pwrite(fd: fd, buffer, at: offset)
        } catch {
            throw MAMError.system("write", errno: error.rawValue)
        }
    }

    /// An empty memory file (memfd: never on disk), closed with the value.
    /// - Throws: `MAMError.system("memfd_create")` with the errno (EMFILE, ENOMEM).
    static func memoryFile(name: String) throws -> FileDescriptor {
        do {
            return try FileDescriptor.memoryFile(name: name)
        } catch {
            throw MAMError.system("memfd_create", errno: error.rawValue)
        }
    }

    /// Size of the open file in bytes.
    static func size(_ fd: Int32) throws -> Int64 {
        Int64(try stat(fd).st_size)
    }

    /// fstat(2) of the open file.
    static func stat(_ fd: Int32) throws -> Glibc.stat {
        var st = Glibc.stat()
        guard fstat(fd, &st) == 0 else { throw MAMError.fromErrno("stat") }
        return st
    }

    /// Reserves backing space for `length` bytes at `offset` without changing the file size,
    /// so a later write into the range cannot fail with ENOSPC halfway through a block.
    /// Filesystems without fallocate are accepted silently (no reservation possible).
    /// - Throws: `MAMError.system(errno: ENOSPC)` when the space is not there.
    static func reserve(_ fd: Int32, offset: Int64, length: Int64) throws {
        guard length > 0 else { return }
        do {
            try SystemCall.fallocate(fd: fd, mode: SystemConstants.fallocateKeepSize, offset: offset, length: length)
        } catch {
            switch error.rawValue {
            case EOPNOTSUPP, ENOSYS, EINVAL, ENODEV, ESPIPE, EBADF: return
            default: throw MAMError.system("reserve space", errno: error.rawValue)
            }
        }
    }
}
