import Foundation
import MAMProtection

/// A fresh state directory (initialized, one account enrolled) and a work directory per test,
/// in one temp directory removed afterwards.
public final class StateFixture {
    /// The enrolled managed account.
    public static let managedId = "8c7f3e1a-0000-4000-8000-000000000001"
    public static let managedUPN = "Alice@Contoso.com"
    /// A GUID that is never registered: an unmanaged identity.
    public static let otherId = "1b2c3d4e-0000-4000-8000-000000000002"

    /// The temp directory holding everything (`root`).
    public let directory: TempDirectory
    /// `directory`'s path.
    public var root: String { directory.path }
    public let stateDirectory: StateDirectory
    /// `ROOT/work`, an empty directory for the test's files.
    public let work: String
    public let context: ProtectionContext

    /// - Parameters:
    ///   - policy: the managed account's policy; nil enrolls nobody.
    ///   - prefix: the temp directory's name start.
    public init(enroll policy: Policy? = .demoEncrypting, passphraseFile: String? = nil, prefix: String = "mamfs-test") throws {
        directory = try TempDirectory(prefix: prefix)
        stateDirectory = StateDirectory(path: directory.path + "/state")
        work = directory.path + "/work"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        context = try ProtectionContext.initialize(stateDirectory: stateDirectory, passphraseFile: passphraseFile)
        if let policy {
            try context.enrollment.enroll(accountId: Self.managedId, upn: Self.managedUPN, policy: policy)
        }
    }

    /// A path in the work directory.
    public func path(_ name: String) -> String { work + "/" + name }

    /// Writes `bytes` to `path(name)`, creating its directories; returns the path.
    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = path(name)
        try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        return p
    }

    /// The raw bytes of a file.
    public func read(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The plaintext of a (possibly protected) file through `ProtectionContext.openContent`.
    public func plaintext(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw MAMError.fromErrno(path) }
        defer { close(fd) }
        let content = try context.openContent(fd: fd)
        let size = Int(try content.plaintextSize())
        var out = [UInt8](repeating: 0, count: size)
        let n = try out.withUnsafeMutableBytes { try content.read(into: $0, at: 0) }
        return Array(out.prefix(n))
    }

    /// Names in `directory` that look like mamfs temp files (`mamfs-tmp`).
    public func filesInTemp(of directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.contains("mamfs-tmp") }
    }
}
