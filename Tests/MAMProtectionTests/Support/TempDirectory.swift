import Foundation

/// A unique directory under /tmp (`/tmp/mamfs-tests-XXXXXX`) that is removed with everything
/// in it when the value goes away. Swift Testing runs tests in parallel, so every test that
/// touches the filesystem makes its own.
final class TempDirectory: Sendable {
    /// The directory.
    let url: URL
    /// The directory as a path string.
    var path: String { url.path }

    /// Creates the directory (mkdtemp, mode 0700).
    /// - Throws: `TempDirectory.CreationFailed` with the errno when mkdtemp fails.
    init() throws {
        var template = Array("/tmp/mamfs-tests-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        guard let created else { throw CreationFailed(errno: errno) }
        url = URL(fileURLWithPath: created, isDirectory: true)
    }

    /// A path inside the directory.
    func file(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// mkdtemp failed.
    struct CreationFailed: Error, CustomStringConvertible {
        let errno: Int32
        var description: String { "cannot create a temp directory: \(String(cString: strerror(errno)))" }
    }
}
