import Foundation
import Testing
@testable import MAMFileProvider
import MAMTestSupport

/// The remote stores the provider and contract tests run on.
enum RemoteKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `LocalDirectoryRemote` on a plain directory.
    case local
    /// `WebDAVRemote` on a real Apache (mod_dav_fs) serving a directory.
    case webdav

    var testDescription: String { rawValue }

    /// Every kind whose server can run here (WebDAV needs apache2, which `make deps` installs).
    static var available: [RemoteKind] {
        ApacheDAVServer.isAvailable ? allCases : [.local]
    }
}

/// One remote of a kind, with a directory on disk that holds its files: for WebDAV the
/// directory Apache serves, so writing there is what another client does and reading there
/// is what the server stored.
final class RemoteHarness: @unchecked Sendable {
    let kind: RemoteKind
    /// The directory the remote's files are in.
    let directory: String
    /// The Apache server (WebDAV only).
    let server: ApacheDAVServer?
    private let scratch: TempDirectory?

    /// A fresh, empty remote. For `.local` the directory is `localDirectory`, or a new temp one.
    init(_ kind: RemoteKind, localDirectory: String? = nil) throws {
        self.kind = kind
        switch kind {
        case .local:
            server = nil
            if let localDirectory {
                scratch = nil
                directory = localDirectory
            } else {
                let made = try TempDirectory(prefix: "mamfs-remote")
                scratch = made
                directory = made.path + "/remote"
            }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        case .webdav:
            let server = try ApacheDAVServer()
            self.server = server
            scratch = nil
            directory = server.davDirectory
        }
    }

    /// The store on the remote.
    func store(readOnly: Bool = false, log: (@Sendable (String) -> Void)? = nil) throws -> any RemoteStore {
        switch kind {
        case .local: return LocalDirectoryRemote(root: directory, readOnly: readOnly, log: log)
        case .webdav:
            guard let server else { throw TestSupportError("no server") }
            return try WebDAVRemote(baseURL: server.baseURL, credentials: credentials, log: log)
        }
    }

    /// The credentials the server accepts (nil for a local directory).
    var credentials: RemoteCredentials? {
        server.map { RemoteCredentials(user: $0.user, password: $0.password) }
    }

    /// What the mount and provider verbs get as `--remote`.
    var location: String { server?.baseURL ?? directory }

    /// Writes a file the way another client would (temp + rename: a new file; for WebDAV owned
    /// by the server's workers).
    func write(_ relative: String, _ bytes: [UInt8]) throws {
        if let server { return try server.write(relative, bytes) }
        let path = directory + "/" + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Makes a directory the way another client would.
    func makeDirectory(_ relative: String) throws {
        let path = directory + "/" + relative
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try server?.giveToWorkers(path)
    }

    /// The bytes of a remote file, read from disk.
    func read(_ relative: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + relative)))
    }

    /// Makes the remote unreachable: the server killed, or the directory renamed away.
    func takeDown() throws {
        if let server { return server.kill() }
        guard rename(directory, directory + ".away") == 0 else { throw TestSupportError("rename \(directory)") }
    }

    /// Undoes `takeDown()`.
    func bringUp() throws {
        if let server { return try server.restart() }
        guard rename(directory + ".away", directory) == 0 else { throw TestSupportError("rename back \(directory)") }
    }

    /// Makes the remote refuse writes, or accept them again: the WebDAV server answers them
    /// 403; a local directory is left as it is (its read-only store is `store(readOnly: true)`).
    func setReadOnly(_ readOnly: Bool) throws {
        try server?.setRefusesWrites(readOnly)
    }

    /// Every regular file below the directory (relative paths, sorted).
    func files() -> [String] { regularFiles(under: directory) }

    /// The files below the directory that start with the protected-file magic (must be none).
    func protectedFiles() -> [String] {
        files().filter { FileSystem.startsWithMagic(directory + "/" + $0) }
    }
}
