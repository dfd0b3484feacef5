import Foundation
import MAMTestSupport

/// A unique temporary directory with its own state directory and HOME, removed on deinit.
/// Every test makes its own, so tests can run in parallel.
final class Sandbox {
    private let directory: TempDirectory
    let root: String
    /// `ROOT/state`, passed to every verb with `--state` by `run`.
    let state: String

    /// The environment every run gets: the test process's, without mamfs variables, with HOME
    /// and XDG_DATA_HOME inside the sandbox so nothing outside it is touched.
    var environment: [String: String]

    init() throws {
        directory = try TempDirectory(prefix: "mamfs-cli")
        // Searchable by every user, as a directory made with the default umask is.
        chmod(directory.path, 0o755)
        let base = directory.url
        root = base.path
        state = base.appendingPathComponent("state").path
        var env = ProcessInfo.processInfo.environment
        env["MAMFS_STATE"] = nil
        env["MAMFS_PASSPHRASE_FILE"] = nil
        env["HOME"] = base.appendingPathComponent("home").path
        env["XDG_DATA_HOME"] = nil
        environment = env
    }

    /// A path inside the sandbox.
    func path(_ relative: String) -> String { root + "/" + relative }

    /// Runs `mamfs ARGS --state STATE` (unless `withState` is false) with `stdin` as input.
    @discardableResult
    func run(_ arguments: [String], stdin: Data = Data(), withState: Bool = true,
             environment extra: [String: String] = [:]) throws -> ProcessResult {
        var env = environment
        for (key, value) in extra { env[key] = value }
        return try runProcess(MamfsBinary.path, arguments + (withState ? ["--state", state] : []), stdin: stdin, environment: env)
    }

    /// `mamfs init` + `mamfs enroll` of the demo account with the encrypting demo policy.
    func initAndEnroll(account: String = Fixtures.account, upn: String = Fixtures.upn) throws {
        let initRun = try run(["init"])
        guard initRun.status == 0 else { throw SandboxError.failed("init", initRun) }
        let policy = try write("policy-encrypt.json", Fixtures.encryptingPolicy)
        let enroll = try run(["enroll", account, "--upn", upn, "--policy", policy])
        guard enroll.status == 0 else { throw SandboxError.failed("enroll", enroll) }
    }

    /// Writes `text` to a file in the sandbox; returns its path.
    @discardableResult
    func write(_ relative: String, _ text: String) throws -> String {
        try write(relative, Data(text.utf8))
    }

    @discardableResult
    func write(_ relative: String, _ data: Data) throws -> String {
        let target = path(relative)
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: target))
        return target
    }

    func read(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    func exists(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: path)
    }
}

enum SandboxError: Error, CustomStringConvertible {
    case failed(String, ProcessResult)
    var description: String {
        switch self {
        case .failed(let what, let result): return "\(what) exited \(result.status): \(result.err)"
        }
    }
}

enum Fixtures {
    static let account = "8c7f3e1a-0000-4000-8000-000000000001"
    static let upn = "demo@contoso.com"
    static let otherAccount = "5d2b9c40-1111-4222-8333-000000000002"
    static let gpl3 = "/usr/share/common-licenses/GPL-3"
    /// A phrase that appears in GPL-3.
    static let gplPhrase = "GNU GENERAL PUBLIC LICENSE"

    static let encryptingPolicy = """
    {
      "fileEncryptionRequired": true,
      "fileProviderEncryptFiles": true,
      "receiveData": "managedOnly",
      "saveToLocations": ["AccountDocument", "OneDriveForBusiness", "SharePoint"],
      "openFromLocations": ["AccountDocument", "Camera", "LocalStorage", "OneDriveForBusiness", "SharePoint"]
    }
    """

    static let plainPolicy = """
    {
      "fileEncryptionRequired": false,
      "fileProviderEncryptFiles": false,
      "receiveData": "all",
      "saveToLocations": ["Other"],
      "openFromLocations": ["Other", "Photos"]
    }
    """

    /// Bytes 0...255 repeated, then `count` pseudo-random bytes (deterministic).
    static func binary(_ count: Int) -> Data {
        var data = Data((0...255).map { UInt8($0) })
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        data.reserveCapacity(256 + count)
        for _ in 0..<count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            data.append(UInt8(truncatingIfNeeded: state))
        }
        return data
    }
}

extension Data {
    /// True when `needle` occurs in the bytes.
    func contains(_ needle: String) -> Bool {
        range(of: Data(needle.utf8)) != nil
    }
}

/// Decodes `info --json` / `accounts --json` output.
func jsonArray(_ result: ProcessResult) throws -> [[String: Any]] {
    guard let array = try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]] else {
        throw SandboxError.failed("JSON array expected", result)
    }
    return array
}
