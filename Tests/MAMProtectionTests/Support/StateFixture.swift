import Foundation
@testable import MAMProtection

/// A fresh state directory and work directory per test, removed afterwards.
final class StateFixture {
    static let managedId = "8c7f3e1a-0000-4000-8000-000000000001"
    static let managedUPN = "Alice@Contoso.com"
    static let otherId = "1b2c3d4e-0000-4000-8000-000000000002"

    let root: String
    let stateDirectory: StateDirectory
    let work: String
    let context: ProtectionContext

    init(enroll policy: Policy? = .demoEncrypting, passphraseFile: String? = nil) throws {
        var template = Array("/tmp/mamfs-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw MAMError.fromErrno("mkdtemp")
        }
        root = String(cString: made)
        stateDirectory = StateDirectory(path: root + "/state")
        work = root + "/work"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        context = try ProtectionContext.initialize(stateDirectory: stateDirectory, passphraseFile: passphraseFile)
        if let policy {
            try context.enrollment.enroll(accountId: StateFixture.managedId, upn: StateFixture.managedUPN, policy: policy)
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func path(_ name: String) -> String { work + "/" + name }

    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = path(name)
        try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        return p
    }

    func read(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The plaintext of a (possibly protected) file through the library.
    func plaintext(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw MAMError.fromErrno(path) }
        defer { close(fd) }
        let content = try context.openContent(fd: fd)
        let size = Int(try content.plaintextSize())
        var out = [UInt8](repeating: 0, count: size)
        let n = try out.withUnsafeMutableBytes { try content.read(into: $0, at: 0) }
        return Array(out.prefix(n))
    }

    func filesInTemp(of directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.contains("mamfs-tmp") }
    }
}

func randomBytes(_ count: Int, seed: UInt64 = 42) -> [UInt8] {
    var state = seed &* 6364136223846793005 &+ 1442695040888963407
    return (0..<count).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}
