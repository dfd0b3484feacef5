import Foundation
import Glibc
import MAMSystem

/// A fresh directory under /var/tmp (a disk filesystem with user xattrs, unlike some /tmp
/// mounts), removed when the value is released.
final class ScratchDirectory {
    let path: String

    init() throws {
        var template = Array("/var/tmp/mamsystem-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }) else {
            throw Errno.current
        }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }

    /// Creates `name` holding `bytes`.
    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let descriptor = try FileDescriptor.open(file(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o600)
        try bytes.withUnsafeBytes { buffer in try descriptor.pwrite(buffer, at: 0) }
        return file(name)
    }
}

/// Whether `fd` is an open descriptor of this process.
func isOpen(_ fd: Int32) -> Bool {
    fcntl(fd, F_GETFD) != -1
}
