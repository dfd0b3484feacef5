import CFuse
import Glibc
import MAMFileProvider

/// A local object found by identity: an O_PATH descriptor taken before a rename, so the
/// deferred remote work finds it under whatever name it has when the work runs.
final class LocalObject: @unchecked Sendable {
    private let fd: Int32
    /// Its item identifier when it was taken (nil: not an item then).
    let identifier: String?

    init?(directory: Int32, name: UnsafePointer<CChar>) {
        let opened = openat(directory, name, mamfs_fuse_O_PATH | O_NOFOLLOW | O_CLOEXEC)
        guard opened >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { getxattr("/proc/self/fd/\(opened)", LocalItemAttributes.itemAttribute, $0.baseAddress, $0.count) }
        fd = opened
        identifier = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }

    deinit { close(fd) }

    /// Its current path; nil when it was removed. A placeholder materialized since was
    /// replaced by a new file under the same name: that one is accepted when it carries
    /// `identifier`.
    func currentPath(expecting identifier: String?) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        var path = buffer.withUnsafeBufferPointer { String(decoding: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0)[0..<n]), as: UTF8.self) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        if st.st_nlink > 0 { return path }
        guard let identifier, path.hasSuffix(" (deleted)") else { return nil }
        path.removeLast(" (deleted)".count)
        return LocalItemAttributes.read(path: path)?.identifier.rawValue == identifier ? path : nil
    }
}
