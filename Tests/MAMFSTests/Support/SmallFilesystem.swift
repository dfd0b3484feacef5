import Foundation
import Glibc
import MAMTestSupport

/// A small filesystem mounted for one test (as root) and always unmounted, lazily as a fallback:
/// a tmpfs, or ext4 on a loop device (ext4 keeps what a failed fallocate allocated; tmpfs
/// gives it back itself).
final class SmallFilesystem: @unchecked Sendable {
    enum Kind { case tmpfs, ext4 }

    let path: String
    private let image: String
    private var mounted = false

    init(_ kind: Kind, megabytes: Int = 64) throws {
        path = NSTemporaryDirectory() + "mamfs-small-\(UUID().uuidString.prefix(10).lowercased())"
        image = path + ".img"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let command: String
        switch kind {
        case .tmpfs:
            command = "mount -t tmpfs -o size=\(megabytes)m,mode=0755 tmpfs \(shellQuote(path))"
        case .ext4:
            command = "truncate -s \(megabytes)M \(shellQuote(image)) && mkfs.ext4 -q -F -m 0 \(shellQuote(image)) && " +
                "mount -o loop \(shellQuote(image)) \(shellQuote(path)) && chmod 755 \(shellQuote(path))"
        }
        let result = try shell(command, timeout: 60)
        guard result.status == 0 else {
            try? FileManager.default.removeItem(atPath: image)
            throw TestSupportError("mounting a small \(kind) failed: \(result.err)")
        }
        mounted = true
    }

    func close() {
        if mounted {
            mounted = false
            if (try? shell("umount \(shellQuote(path))", timeout: 30))?.status != 0 {
                _ = try? shell("umount -l \(shellQuote(path))", timeout: 30)
            }
        }
        try? FileManager.default.removeItem(atPath: path)
        try? FileManager.default.removeItem(atPath: image)
    }

    deinit { close() }
}
