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

/// How many of this process's descriptors are open on `path` (absolute, symlink-free), from
/// the /proc/self/fd links. Asked by target rather than by number: other tests' threads open
/// and close descriptors meanwhile, and a closed number may already be someone else's.
func descriptors(of path: String) -> Int {
    guard let stream = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(stream) }
    var count = 0
    var target = [CChar](repeating: 0, count: 4096)
    while let entry = readdir(stream) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard !name.hasPrefix(".") else { continue }
        let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
        guard length > 0 else { continue }
        if String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == path { count += 1 }
    }
    return count
}
