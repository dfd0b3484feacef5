import Foundation
import Glibc
import MAMTestSupport

/// A directory on ext4 to compare a mount with, byte for byte: the fixture's plain directory
/// when the temp directory is on ext4, else a small ext4 image mounted for the test (and
/// always unmounted by `close`).
final class Ext4Reference: @unchecked Sendable {
    let path: String
    private let disk: SmallFilesystem?

    init(_ m: MountedFixture) throws {
        if Ext4Reference.isExt4(m.plain) {
            path = m.plain
            disk = nil
        } else {
            let disk = try SmallFilesystem(.ext4, megabytes: 256)
            path = disk.path + "/reference"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            self.disk = disk
        }
    }

    /// Whether `path` lies on an ext4 filesystem (statfs f_type 0xef53, as `stat -f` reads it).
    static func isExt4(_ path: String) -> Bool {
        (try? shell("stat -f -c %t \(shellQuote(path))"))?.out == "ef53\n"
    }

    func close() { disk?.close() }

    deinit { close() }
}
