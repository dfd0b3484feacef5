import Foundation
import Glibc
@testable import MAMFS
import MAMFileProvider
@testable import MAMProtection

/// The overlay's core over a temp backing directory, called directly (no /dev/fuse): a fresh
/// state with one enrolled account whose policy requires encryption, under one temp directory
/// removed afterwards.
final class OverlayCoreFixture {
    static let account = "8c7f3e1a-0000-4000-8000-00000000c0de"

    let base: String
    let backing: String
    let context: ProtectionContext
    let fs: OverlayFilesystem

    /// `managed`: new files get the enrolled account (encrypted); otherwise unmanaged (plain).
    /// `provider`: binds the backing directory to a remote in `base` as that provider kind.
    /// `policy`: the account's policy; `passphrase`: the state's master key comes from it.
    init(managed: Bool = true, provider: ProviderKind? = nil, policy: Policy = .demoEncrypting, passphrase: String? = nil) throws {
        var template = Array("/tmp/mamfs-core-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw MAMError.fromErrno("mkdtemp")
        }
        base = String(cString: made)
        backing = base + "/backing"
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
        var passphraseFile: String?
        if let passphrase {
            passphraseFile = base + "/passphrase"
            try Data(passphrase.utf8).write(to: URL(fileURLWithPath: base + "/passphrase"))
        }
        context = try ProtectionContext.initialize(stateDirectory: StateDirectory(path: base + "/state"), passphraseFile: passphraseFile)
        try context.enrollment.enroll(accountId: Self.account, upn: nil, policy: policy)
        var options = MountOptions(backingDirectory: backing, mountpoint: base + "/mnt", account: managed ? Self.account : "")
        if let provider {
            let remote = base + "/remote"
            try FileManager.default.createDirectory(atPath: remote, withIntermediateDirectories: true)
            options.provider = provider
            options.remote = remote
        }
        fs = try OverlayFilesystem(context: context, options: options, rootPath: backing)
    }

    deinit {
        fs.stop()
        try? FileManager.default.removeItem(atPath: base)
    }

    let caller = Caller(uid: 0, gid: 0, pid: getpid())
    var root: UInt64 { fs.table.root.nodeid }

    /// Runs `body` as one request does (node descriptors pinned until it returns).
    func request<R>(_ body: () throws -> R) rethrows -> R {
        try DescriptorCache.withPins(body)
    }

    /// The errno `body` fails with (through the core's one mapping), 0 when it succeeds.
    func errno(_ body: () throws -> Void) -> Int32 {
        do {
            try request(body)
            return 0
        } catch {
            return fs.errnoCode(error, nil)
        }
    }

    /// The backing file's bytes.
    func backingBytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: backing + "/" + name)))
    }

    /// Reads all of `handle` from plaintext offset 0 (up to `size` bytes) through the core.
    func read(_ handle: OpenFile, size: Int = 1 << 16) throws -> [UInt8] {
        try request { try fs.read(handle, size: size, offset: 0, caller: caller) { Array($0) } }
    }
}
