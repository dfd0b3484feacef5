import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// A fresh state (with one enrolled managed account), a remote and a local root per test, all
/// under one temp directory removed afterwards. The remote is a plain directory, or (`.webdav`)
/// a real Apache serving a directory of its own: `remoteRoot` is then that directory, so the
/// remote-side helpers read what the server stored and write as another client would.
final class ProviderFixture {
    static let managedId = StateFixture.managedId
    static let managedUPN = StateFixture.managedUPN
    /// A GUID that is never registered: an unmanaged identity.
    static let unmanagedId = StateFixture.otherId

    /// The state, enrolled account and temp directory (removed, permissions restored first).
    let state: StateFixture
    let root: String
    let remoteRoot: String
    let localRoot: String
    let outside: String
    var context: ProtectionContext { state.context }
    /// Which store the providers get by default.
    let remoteKind: RemoteKind
    /// The remote (its server for `.webdav`).
    let harness: RemoteHarness

    /// - Parameters:
    ///   - policy: the managed account's policy (nil: nobody enrolled).
    ///   - remoteKind: the store the providers get by default (`store()`).
    init(policy: Policy? = .demoEncrypting, remoteKind: RemoteKind = .local) throws {
        state = try StateFixture(enroll: policy, prefix: "mamfs-fp-test")
        root = state.root
        self.remoteKind = remoteKind
        harness = try RemoteHarness(remoteKind, localDirectory: state.root + "/remote")
        remoteRoot = harness.directory
        localRoot = root + "/local"
        outside = root + "/outside"
        for directory in [localRoot, outside] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
    }

    // MARK: Providers

    /// The local-directory store on `remoteRoot` (only for `.local` fixtures).
    func remote(readOnly: Bool = false) -> LocalDirectoryRemote { LocalDirectoryRemote(root: remoteRoot, readOnly: readOnly) }

    /// The fixture's store: the local-directory one, or the WebDAV one on its server.
    func store() throws -> any RemoteStore { try harness.store() }

    func domain(_ account: String = ProviderFixture.managedId, remote: (any RemoteStore)? = nil) throws -> FileProviderDomain {
        try FileProviderDomain(account: account, remote: remote ?? self.store(), context: context)
    }

    func replicated(_ account: String = ProviderFixture.managedId, remote: (any RemoteStore)? = nil, localRoot: String? = nil) throws -> ReplicatedProvider {
        try ReplicatedProvider(replicaRoot: localRoot ?? self.localRoot, domain: domain(account, remote: remote))
    }

    func nonReplicated(_ account: String = ProviderFixture.managedId, remote: (any RemoteStore)? = nil, localRoot: String? = nil) throws -> NonReplicatedProvider {
        try NonReplicatedProvider(localRoot: localRoot ?? self.localRoot, domain: domain(account, remote: remote))
    }

    // MARK: Files

    func remotePath(_ relative: String) -> String { remoteRoot + "/" + relative }
    func localPath(_ relative: String) -> String { localRoot + "/" + relative }

    /// Writes a remote file the way another client would (temp + rename: a new inode; for
    /// WebDAV a file the server's workers own).
    @discardableResult
    func writeRemote(_ relative: String, _ bytes: [UInt8]) throws -> String {
        try harness.write(relative, bytes)
        return remotePath(relative)
    }

    @discardableResult
    func write(_ path: String, _ bytes: [UInt8]) throws -> String {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        return path
    }

    /// Writes a local file owned by `owner` the way the mount would: encrypted when the
    /// owner's policy requires it, plain-tagged otherwise (a new inode every time).
    @discardableResult
    func writeLocalProtected(_ relative: String, _ bytes: [UInt8], owner: String = ProviderFixture.managedId) throws -> String {
        let path = localPath(relative)
        let staging = outside + "/staging-\(UUID().uuidString)"
        try write(staging, bytes)
        try context.files.protect(path: staging, accountId: owner, recursive: false)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        guard rename(staging, path) == 0 else { throw MAMError.fromErrno("rename \(staging)") }
        return path
    }

    func read(_ path: String) throws -> [UInt8] { try state.read(path) }

    /// The plaintext of a (possibly protected) file through `ProtectionContext.openContent`.
    func plaintext(_ path: String) throws -> [UInt8] { try state.plaintext(path) }

    func header(_ path: String) throws -> ProtectedFileHeader? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw MAMError.fromErrno(path) }
        defer { close(fd) }
        return try ProtectedFileHeader.read(fd: fd)
    }

    func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Every regular file under `directory` (relative paths), skipping the provider's own files.
    func files(under directory: String) -> [String] {
        var result: [String] = []
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        while let relative = enumerator.nextObject() as? String {
            if relative == ProviderLayout.metadataDirectoryName || relative.hasPrefix(ProviderLayout.metadataDirectoryName + "/") { continue }
            var st = stat()
            if lstat(directory + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { result.append(relative) }
        }
        return result.sorted()
    }

    /// Snapshot of every remote file's bytes.
    func remoteSnapshot() throws -> [String: [UInt8]] {
        var snapshot: [String: [UInt8]] = [:]
        for relative in files(under: remoteRoot) { snapshot[relative] = try read(remotePath(relative)) }
        return snapshot
    }

    /// The remote files that start with the protected-file magic (must always be none).
    func protectedFilesOnRemote() -> [String] {
        files(under: remoteRoot).filter { FileSystem.startsWithMagic(remotePath($0)) }
    }

    /// The rule every scenario ends with: the remote holds plain files only.
    func expectRemotePlain(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(protectedFilesOnRemote() == [], "the remote holds protected files", sourceLocation: sourceLocation)
    }

    /// Temp files left anywhere under `directory` (including the provider's tmp directory).
    func leftoverTemporaryFiles(under directory: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        var result: [String] = []
        while let relative = enumerator.nextObject() as? String {
            if relative.contains(".mamfs-tmp-") { result.append(relative) }
        }
        return result
    }
}

/// A remote that disappears when the `after`-th file read starts, like a network share
/// unmounted or a server going down in the middle of a sync: its harness takes it down (the
/// directory renamed away, the WebDAV server killed). `restore()` brings it back.
final class VanishingRemote: HookedRemote, @unchecked Sendable {
    private let stateLock = NSLock()
    private let after: Int
    private let harness: RemoteHarness
    private var _vanished = false
    var vanished: Bool { stateLock.withLock { _vanished } }

    init(_ inner: any RemoteStore, harness: RemoteHarness, vanishAfterReads after: Int) {
        self.after = after
        self.harness = harness
        super.init(inner)
    }

    override func beforeRead(_ count: Int) {
        stateLock.withLock {
            if count == after && !_vanished {
                _vanished = (try? harness.takeDown()) != nil
            }
        }
    }

    func restore() throws {
        try stateLock.withLock {
            if _vanished { try harness.bringUp(); _vanished = false }
        }
    }
}
