import CSystem
import Foundation
import MAMProtection

/// Where a provider keeps its own files inside its local root (the mount's backing directory
/// or the replica):
/// ```
/// ROOT/.mamfs-provider/          0700, hidden by the mount
///     provider.db                SQLite (WAL): configuration, and for the replicated
///                                provider the item database and sync anchor
///     tmp/                       0600 temp files (downloads, provided copies, plain copies
///                                for upload); same filesystem as ROOT, so a finished copy is
///                                renamed into the tree atomically
/// ```
public struct ProviderLayout: Sendable {
    /// Name of the metadata directory at the top of the local root. The mount must not show it.
    public static let metadataDirectoryName = ".mamfs-provider"
    /// Name of the database file inside the metadata directory.
    public static let databaseFileName = "provider.db"

    /// The local root, absolute and standardized.
    public let root: String

    /// - Parameter root: the local root (backing directory or replica).
    public init(root: String) {
        self.root = URL(fileURLWithPath: root, isDirectory: true).standardizedFileURL.path
    }

    /// `ROOT/.mamfs-provider`.
    public var metadataDirectory: String { root + "/" + Self.metadataDirectoryName }
    /// `ROOT/.mamfs-provider/provider.db`.
    public var databasePath: String { metadataDirectory + "/" + Self.databaseFileName }
    /// `ROOT/.mamfs-provider/tmp`.
    public var temporaryDirectory: String { metadataDirectory + "/tmp" }

    /// True when `ROOT/.mamfs-provider/provider.db` exists.
    public var exists: Bool { FileSystem.lstatPath(databasePath) != nil }

    /// Creates the root (if missing), the metadata directory (0700) and its tmp directory, and
    /// removes temp files a crashed run left behind (older than an hour, so the temp files of
    /// another process working on the same root right now are left alone).
    /// - Throws: `.cannotCreateOutput`.
    func prepare() throws {
        try FileSystem.makeDirectories(root)
        for directory in [metadataDirectory, temporaryDirectory] {
            if mkdir(directory, 0o700) != 0 && errno != EEXIST {
                throw MAMError.cannotCreateOutput("\(directory): \(String(cString: strerror(errno)))")
            }
            chmod(directory, 0o700)
        }
        let cutoff = Int64(Date().timeIntervalSince1970 - 3600) * 1_000_000_000
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporaryDirectory)) ?? [] {
            let path = temporaryDirectory + "/" + name
            if let st = FileSystem.lstatPath(path), FileSystem.mtimeNanoseconds(st) < cutoff { unlink(path) }
        }
    }

    /// A new empty 0600 temp file in `tmp/`, removed when the value goes away unless it was
    /// renamed away with `TemporaryFile.move(to:)`.
    /// - Throws: `.cannotCreateOutput`.
    func makeTemporaryFile(name: String = "item") throws -> TemporaryFile {
        guard let (fd, path) = FileSystem.makeTemporaryFile(in: temporaryDirectory, name: name) else {
            throw MAMError.cannotCreateOutput("temp file in \(temporaryDirectory): \(String(cString: strerror(errno)))")
        }
        close(fd)
        return TemporaryFile(path: path)
    }

    /// The path of a local item relative to the root ("" for the root itself), nil when `path`
    /// is outside the root.
    func relativePath(of path: String) -> String? {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        if absolute == root { return "" }
        guard absolute.hasPrefix(root + "/") else { return nil }
        return String(absolute.dropFirst(root.count + 1))
    }

    /// The absolute path of a relative local path.
    func absolutePath(_ relative: String) -> String { FileSystem.join(root, relative) }

    /// The provider root holding `path`: the nearest of `path` and its ancestors that has a
    /// `.mamfs-provider/provider.db`.
    public static func enclosing(_ path: String) -> ProviderLayout? {
        var current = URL(fileURLWithPath: path).standardizedFileURL.path
        while true {
            let layout = ProviderLayout(root: current)
            if layout.exists { return layout }
            if current == "/" || current.isEmpty { return nil }
            current = PathName.directory(of: current)
        }
    }
}

/// A temp file that is unlinked when released, unless moved into place.
final class TemporaryFile {
    private(set) var path: String
    private var owned = true

    init(path: String) { self.path = path }

    var url: URL { URL(fileURLWithPath: path) }

    /// Renames the file to `target` (same filesystem), replacing it atomically, and fsyncs the
    /// target's directory. After this the file is no longer removed on release.
    /// - Throws: `.system` with the rename errno; the temp file is still owned then.
    func move(to target: String) throws {
        guard rename(path, target) == 0 else { throw MAMError.fromErrno("rename to \(target)") }
        owned = false
        FileSystem.syncDirectory(PathName.directory(of: target))
    }

    /// Forgets the file (it was renamed away by the caller).
    func release() { owned = false }

    deinit {
        if owned { unlink(path) }
    }
}
