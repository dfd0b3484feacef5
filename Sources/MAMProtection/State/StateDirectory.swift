import Foundation

/// The directory holding one mamfs state: the SQLite state database (`state.db`) and the
/// master key file (`master.key`).
///
/// Resolution order (see `resolve(explicit:environment:)`): the `--state DIR` option, then
/// `$MAMFS_STATE`, then `$XDG_DATA_HOME/mamfs`, then `$HOME/.local/share/mamfs`.
public struct StateDirectory: Sendable, Hashable, CustomStringConvertible {
    /// File name of the state database inside the directory.
    public static let databaseFileName = "state.db"
    /// File name of the master key file inside the directory.
    public static let masterKeyFileName = "master.key"
    /// Environment variable naming the state directory.
    public static let environmentVariable = "MAMFS_STATE"

    /// The directory, absolute and standardized.
    public let url: URL

    /// A state directory at `url` (a relative file URL is taken relative to the current directory).
    public init(url: URL) {
        self.url = URL(fileURLWithPath: url.path, isDirectory: true).standardizedFileURL
    }

    /// A state directory at `path` (relative paths are taken relative to the current directory).
    public init(path: String) {
        self.init(url: URL(fileURLWithPath: path, isDirectory: true))
    }

    /// `DIR/state.db`.
    public var databaseURL: URL { url.appendingPathComponent(Self.databaseFileName, isDirectory: false) }

    /// `DIR/master.key`.
    public var masterKeyURL: URL { url.appendingPathComponent(Self.masterKeyFileName, isDirectory: false) }

    /// True when the directory exists (and is a directory).
    public var exists: Bool { Self.isDirectory(url.path) }

    /// True when `state.db` exists in the directory.
    public var databaseExists: Bool { FileManager.default.fileExists(atPath: databaseURL.path) }

    public var description: String { url.path }

    /// Picks the state directory: `explicit` (the `--state DIR` value) when given, else
    /// `environment["MAMFS_STATE"]`, else `$XDG_DATA_HOME/mamfs` (only when absolute, as the XDG
    /// spec requires), else `$HOME/.local/share/mamfs` (the home directory from the password
    /// database when `HOME` is unset). Empty values count as unset; a leading `~` is expanded.
    /// Reads only `environment`, never the process environment itself.
    public static func resolve(explicit: String?,
                               environment: [String: String] = ProcessInfo.processInfo.environment) -> StateDirectory {
        let home = homeDirectory(environment: environment)
        if let explicit, !explicit.isEmpty {
            return StateDirectory(path: expandTilde(explicit, home: home))
        }
        if let value = environment[environmentVariable], !value.isEmpty {
            return StateDirectory(path: expandTilde(value, home: home))
        }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return StateDirectory(path: PathName.appending("mamfs", to: xdg))
        }
        return StateDirectory(path: PathName.appending(".local/share/mamfs", to: home))
    }

    /// Creates the directory with mode 0700 (regardless of the umask), creating missing parents
    /// like `mkdir -p` (mode 0777 minus the umask). An existing directory is left as it is.
    /// - Throws: `MAMError.cannotCreateOutput` when the directory or a parent cannot be created
    ///   or a path component exists and is not a directory.
    public func create() throws {
        let path = url.path
        if Self.isDirectory(path) { return }
        var current = ""
        let components = url.pathComponents.filter { $0 != "/" }
        for (index, component) in components.enumerated() {
            current += "/" + component
            let isLast = index == components.count - 1
            if Self.isDirectory(current) { continue }
            if mkdir(current, isLast ? 0o700 : 0o777) != 0 {
                let code = errno
                if code == EEXIST && Self.isDirectory(current) { continue }
                let reason = code == EEXIST ? "exists and is not a directory" : String(cString: strerror(code))
                throw MAMError.cannotCreateOutput("cannot create state directory \(current): \(reason)")
            }
            if isLast && chmod(current, 0o700) != 0 {
                let code = errno
                throw MAMError.cannotCreateOutput("cannot set mode 0700 on state directory \(current): \(String(cString: strerror(code)))")
            }
        }
    }

    private static func isDirectory(_ path: String) -> Bool {
        var isDir: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue
    }

    private static func expandTilde(_ path: String, home: String) -> String {
        if path == "~" { return home }
        if path.hasPrefix("~/") { return PathName.appending(String(path.dropFirst(2)), to: home) }
        return path
    }

    /// `$HOME`, else the password database entry of the current user, else "/".
    private static func homeDirectory(environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        var buffer = [CChar](repeating: 0, count: 16_384)
        let home: String? = buffer.withUnsafeMutableBufferPointer { storage in
            // pw_dir points into `storage`, so it is read before the closure returns.
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            guard let base = storage.baseAddress,
                  getpwuid_r(getuid(), &entry, base, storage.count, &result) == 0,
                  result != nil, let dir = entry.pw_dir else { return nil }
            return String(cString: dir)
        }
        if let home, !home.isEmpty { return home }
        return "/"
    }
}
