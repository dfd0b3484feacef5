import Foundation
import MAMProtection
import MAMSystem

/// Where a provider keeps its own files inside its local root (the mount's backing directory
/// or the replica):
/// ```
/// ROOT/.mamfs-provider/          0700, hidden by the mount
///     provider.db                SQLite (WAL): configuration, and for the replicated
///                                provider the item database and sync anchor
///     tmp/s-PID-RANDOM/          one 0700 directory per running process
///                                (`ProviderTemporaryArea`): 0600 temp files of provided copies
///                                and placeholders, on the same filesystem as ROOT so a finished
///                                copy is renamed into the tree atomically. Never plaintext of a
///                                managed file: downloads and upload copies are in memory.
/// ```
///
/// Every operation on the tree goes through `confined()` (no symlink followed, nothing
/// outside ROOT reachable).
public struct ProviderLayout: Sendable {
    /// Name of the metadata directory at the top of the local root. The mount must not show it.
    public static let metadataDirectoryName = ".mamfs-provider"

    /// True for a name of the form of mamfs' temp files (`.NAME.mamfs-tmp-...`), which both
    /// providers skip when they walk a tree.
    public static func isTemporaryName(_ name: String) -> Bool { FileSystem.isTemporaryName(name) }
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
    /// removes what crashed or killed runs left in tmp (`ProviderTemporaryArea.sweep`: every
    /// session directory no live process holds).
    /// - Throws: `.cannotCreateOutput` (also when the metadata or tmp directory is a symlink
    ///   or not a directory).
    func prepare() throws {
        try FileSystem.makeDirectories(root)
        for directory in [metadataDirectory, temporaryDirectory] {
            if mkdir(directory, 0o700) != 0 && errno != EEXIST {
                throw MAMError.cannotCreateOutput("\(directory): \(String(cString: strerror(errno)))")
            }
            guard let st = FileSystem.lstatPath(directory), FileSystem.isDirectory(st) else {
                throw MAMError.cannotCreateOutput("\(directory) is not a directory")
            }
            chmod(directory, 0o700)
        }
        ProviderTemporaryArea.sweep(temporaryDirectory)
    }

    /// The root as a `ConfinedDirectory` (every tree operation goes through one).
    /// - Throws: `MAMError.system` when the root cannot be opened.
    func confined() throws -> ConfinedDirectory { try ConfinedDirectory(path: root) }

    /// A new empty 0600 temp file in this process's session directory of `tmp/`, removed when
    /// the value goes away unless it was renamed away with `TemporaryFile.move`.
    /// - Throws: `.cannotCreateOutput`.
    func makeTemporaryFile(name: String = "item") throws -> TemporaryFile {
        try makeTemporaryFile(name: name) { _ in }
    }

    /// `makeTemporaryFile`, with `body` run on the new file's descriptor (open read-write,
    /// closed when `body` returns; nothing synced). When `body` throws, the file is removed.
    /// - Throws: `.cannotCreateOutput`; what `body` throws.
    func makeTemporaryFile(name: String, writing body: (Int32) throws -> Void) throws -> TemporaryFile {
        let session = try ProviderTemporaryArea.session(for: self)
        let created: NamedTemporaryFile
        do {
            created = try MAMSystem.TemporaryFile.createNamed(template: FileSystem.temporaryTemplate(in: session.path, name: name))
        } catch {
            throw MAMError.cannotCreateOutput("temp file in \(session.path): \(error)")
        }
        let temp = TemporaryFile(path: created.path, relative: session.relative + "/" + PathName.lastComponent(of: created.path))
        let file = FileDescriptor(adopting: created.take())
        try body(file.rawValue)
        return temp
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
    /// The path relative to the local root.
    let relative: String
    private var owned = true

    init(path: String, relative: String) {
        self.path = path
        self.relative = relative
    }

    var url: URL { URL(fileURLWithPath: path) }

    /// Renames the file to `target` (relative to `root`, same filesystem), atomically
    /// replacing what is there (or, with `noReplace`, failing with EEXIST), without following
    /// any symlink, and fsyncs the target's directory. After this the file is no longer
    /// removed on release. The caller has made the file's contents durable first (fsync).
    /// - Throws: `.system` with the rename errno; the temp file is still owned then.
    func move(to target: String, in root: ConfinedDirectory, noReplace: Bool = false) throws {
        try place(at: target, in: root, noReplace: noReplace)
        root.syncDirectory(PathName.parent(of: target))
    }

    /// The rename of `move` without the directory fsync: for a caller that makes a whole batch
    /// of renames durable at once (`ProvidedCopyBatch`).
    /// - Throws: `.system` with the rename errno; the temp file is still owned then.
    func place(at target: String, in root: ConfinedDirectory, noReplace: Bool = false) throws {
        guard root.rename(relative, target, flags: noReplace ? SystemConstants.renameNoReplace : 0) == 0 else {
            throw MAMError.fromErrno(noReplace ? "create \(target)" : "rename to \(target)")
        }
        owned = false
    }

    /// `place` with the directories already open: `source` is this file's directory (in the
    /// temp area), `directory` the target's (both O_PATH descriptors below the same root), so a
    /// batch of renames between the same directories opens each once.
    /// - Throws: `.system` with the rename errno; the temp file is still owned then.
    func place(fromDirectory source: Int32, toDirectory directory: Int32, name: String, noReplace: Bool) throws {
        do {
            try SystemCall.rename(from: source, PathName.lastComponent(of: relative), to: directory, name,
                                  flags: noReplace ? SystemConstants.renameNoReplace : 0)
        } catch {
            throw MAMError.system(noReplace ? "create \(name)" : "rename to \(name)", errno: error.rawValue)
        }
        owned = false
    }

    deinit {
        if owned { unlink(path) }
    }
}
