import Foundation

/// A unique directory under /tmp (`/tmp/PREFIX-XXXXXX`, mkdtemp, mode 0700) that is removed
/// with everything in it when the value goes away. Swift Testing runs tests in parallel, so
/// every test that touches the filesystem makes its own.
public final class TempDirectory: Sendable {
    /// The directory.
    public let url: URL
    /// The directory as a path string.
    public var path: String { url.path }

    /// Creates the directory.
    /// - Parameter prefix: the name's start (the rest is six random characters).
    /// - Throws: `TempDirectory.CreationFailed` with the errno when mkdtemp fails.
    public init(prefix: String = "mamfs-tests") throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        guard let created else { throw CreationFailed(errno: errno) }
        url = URL(fileURLWithPath: created, isDirectory: true)
    }

    /// A path inside the directory.
    public func file(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Makes every directory below `path` writable and searchable again (tests take those
    /// permissions away), so removal cannot stop half-way.
    public static func restorePermissions(under path: String) {
        chmod(path, 0o755)
        guard let enumerator = FileManager.default.enumerator(atPath: path) else { return }
        while let relative = enumerator.nextObject() as? String {
            let child = path + "/" + relative
            var st = stat()
            if lstat(child, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { chmod(child, 0o755) }
        }
    }

    deinit {
        Self.restorePermissions(under: url.path)
        try? FileManager.default.removeItem(at: url)
    }

    /// mkdtemp failed.
    public struct CreationFailed: Error, CustomStringConvertible {
        /// What mkdtemp set.
        public let errno: Int32
        public var description: String { "cannot create a temp directory: \(String(cString: strerror(errno)))" }
    }
}
