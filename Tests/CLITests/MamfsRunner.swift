import Foundation

/// The result of one run of the `mamfs` binary.
struct RunResult {
    let status: Int32
    let stdout: Data
    let stderr: Data

    var out: String { String(decoding: stdout, as: UTF8.self) }
    var err: String { String(decoding: stderr, as: UTF8.self) }
    /// stderr split into lines (without the empty tail).
    var errLines: [String] { err.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
}

enum MamfsLocator {
    /// The built `mamfs` binary: `$MAMFS_BIN`, else the first directory above the test bundle
    /// (or the test process's argv[0]) that holds an executable file named `mamfs`.
    static let path: String = locate()

    private static func locate() -> String {
        if let explicit = ProcessInfo.processInfo.environment["MAMFS_BIN"], !explicit.isEmpty {
            return explicit
        }
        let starts = [Bundle.main.bundlePath, CommandLine.arguments.first ?? ""]
            .filter { !$0.isEmpty }
            .map { URL(fileURLWithPath: $0).standardizedFileURL }
        for start in starts {
            var directory = start
            for _ in 0..<8 {
                let candidate = directory.appendingPathComponent("mamfs").path
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate) {
                    return candidate
                }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return "mamfs-binary-not-found (set MAMFS_BIN)"
    }
}

/// A unique temporary directory with its own state directory and HOME, removed on deinit.
/// Every test makes its own, so tests can run in parallel.
final class Sandbox {
    let root: String
    /// `ROOT/state`, passed to every verb with `--state` by `run`.
    let state: String

    /// The environment every run gets: the test process's, without mamfs variables, with HOME
    /// and XDG_DATA_HOME inside the sandbox so nothing outside it is touched.
    var environment: [String: String]

    init() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("mamfs-cli-\(UUID().uuidString.prefix(12))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        root = base.path
        state = base.appendingPathComponent("state").path
        var env = ProcessInfo.processInfo.environment
        env["MAMFS_STATE"] = nil
        env["MAMFS_PASSPHRASE_FILE"] = nil
        env["HOME"] = base.appendingPathComponent("home").path
        env["XDG_DATA_HOME"] = nil
        environment = env
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A path inside the sandbox.
    func path(_ relative: String) -> String { root + "/" + relative }

    /// Runs `mamfs ARGS --state STATE` (unless `withState` is false) with `stdin` as input.
    @discardableResult
    func run(_ arguments: [String], stdin: Data = Data(), withState: Bool = true,
             environment extra: [String: String] = [:]) throws -> RunResult {
        var env = environment
        for (key, value) in extra { env[key] = value }
        return try runProcess(MamfsLocator.path, arguments + (withState ? ["--state", state] : []), stdin: stdin, environment: env)
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
    case failed(String, RunResult)
    case spawn(String)
    var description: String {
        switch self {
        case .failed(let what, let result): return "\(what) exited \(result.status): \(result.err)"
        case .spawn(let message): return "cannot start \(message)"
        }
    }
}

/// Runs `executable` with stdin, stdout and stderr in temporary files (no pipe deadlocks, any
/// size) and waits for that process only. posix_spawn + waitpid rather than Foundation's
/// Process: Process waits for an inherited socket to close, so a daemon the child forks (mamfs
/// mount) would make it wait until the daemon exits.
func runProcess(_ executable: String, _ arguments: [String], stdin: Data, environment: [String: String]) throws -> RunResult {
    let scratch = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("mamfs-run-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let inPath = scratch.appendingPathComponent("stdin").path
    let outPath = scratch.appendingPathComponent("stdout").path
    let errPath = scratch.appendingPathComponent("stderr").path
    try stdin.write(to: URL(fileURLWithPath: inPath))

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, inPath, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
    guard spawned == 0 else {
        throw SandboxError.spawn("\(executable): \(String(cString: strerror(spawned)))")
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let exited = (status & 0x7f) == 0
    return RunResult(status: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f),
                     stdout: try Data(contentsOf: URL(fileURLWithPath: outPath)),
                     stderr: try Data(contentsOf: URL(fileURLWithPath: errPath)))
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
func jsonArray(_ result: RunResult) throws -> [[String: Any]] {
    guard let array = try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]] else {
        throw SandboxError.failed("JSON array expected", result)
    }
    return array
}
