import Foundation
import Glibc
import MAMProtection

/// Output of a command run by a test.
struct ShellResult {
    let status: Int32
    let out: String
    let err: String
}

struct RobustError: Error, CustomStringConvertible {
    let description: String
}

/// Paths the robustness tests need: the built `mamfs`, the repository root, the tools.
enum Robust {
    /// `$MAMFS_BIN`, else the first directory above the test bundle holding an executable `mamfs`.
    static let mamfs: String = {
        if let explicit = ProcessInfo.processInfo.environment["MAMFS_BIN"], !explicit.isEmpty { return explicit }
        for start in [Bundle.main.bundlePath, CommandLine.arguments.first ?? ""] where !start.isEmpty {
            var directory = URL(fileURLWithPath: start).standardizedFileURL
            for _ in 0..<8 {
                let candidate = directory.appendingPathComponent("mamfs").path
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate) {
                    return candidate
                }
                directory.deleteLastPathComponent()
            }
        }
        return "mamfs"
    }()

    /// The package root (this file is Tests/RobustnessTests/Support/RobustMount.swift).
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.path
    }()

    static var fsdiff: String { root + "/Tools/fsdiff.py" }
    static var regressions: String { root + "/Tests/RobustnessTests/Regressions" }

    /// `MAMFS_SOAK=1` (make soak) selects the long versions.
    static var soak: Bool { ProcessInfo.processInfo.environment["MAMFS_SOAK"] == "1" }

    /// An integer knob from the environment (soak scaling), else `fallback`.
    static func knob(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }
}

/// Runs `script` with bash in its own process group; outputs go through files; on timeout
/// the whole group gets SIGKILL and the status is 124.
@discardableResult
func shell(_ script: String, environment extra: [String: String] = [:], timeout: TimeInterval = 120) throws -> ShellResult {
    let id = UUID().uuidString
    let outPath = NSTemporaryDirectory() + "mamfs-rsh-\(id).out"
    let errPath = NSTemporaryDirectory() + "mamfs-rsh-\(id).err"
    FileManager.default.createFile(atPath: outPath, contents: nil)
    FileManager.default.createFile(atPath: errPath, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
    process.arguments = ["--wait", "/bin/bash", "-c", script]
    var environment = ProcessInfo.processInfo.environment
    environment["MAMFS_STATE"] = nil
    environment["LC_ALL"] = "C"
    for (key, value) in extra { environment[key] = value }
    process.environment = environment
    process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
    process.standardOutput = FileHandle(forWritingAtPath: outPath)
    process.standardError = FileHandle(forWritingAtPath: errPath)
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    while process.isRunning {
        if Date() > deadline {
            timedOut = true
            kill(-process.processIdentifier, SIGKILL)
            break
        }
        usleep(5_000)
    }
    process.waitUntilExit()
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    if timedOut { return ShellResult(status: 124, out: out, err: err + "\n(timed out after \(Int(timeout)) s)") }
    return ShellResult(status: process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus,
                       out: out, err: err)
}

func shellQuote(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Milliseconds since `start`, for the per-part timings the tests print.
func elapsed(_ start: Date) -> String { String(format: "%.1f s", Date().timeIntervalSince(start)) }

/// A state, a backing directory and a `mamfs mount` daemon for one test. Remountable (crash
/// rounds); `close()` always unmounts (fusermount3 -u, then -uz) and kills the daemon by PID.
final class RobustMount: @unchecked Sendable {
    enum Kind: String, CaseIterable, Sendable {
        case managed, unmanaged
    }

    static let account = "8c7f3e1a-0000-4000-8000-00000000a11c"
    static let otherAccount = "8c7f3e1a-0000-4000-8000-00000000b0b0"

    let kind: Kind
    let base: String
    let state: String
    let backing: String
    let mountpoint: String
    let log: String
    private(set) var mounted = false
    private var daemons: [pid_t] = []

    var environment: [String: String] {
        ["M": mountpoint, "B": backing, "S": state, "MAMFS": Robust.mamfs, "ACCT": RobustMount.account,
         "OTHER": RobustMount.otherAccount, "BASE": base, "LOG": log, "TOOLS": Robust.root + "/Tools"]
    }

    /// - Parameters: backing/state: custom locations (a small tmpfs); mount: mount at once.
    init(_ kind: Kind, backing customBacking: String? = nil, state customState: String? = nil, mount: Bool = true) throws {
        self.kind = kind
        base = "/tmp/mamfs-rob-\(UUID().uuidString.prefix(12).lowercased())"
        state = customState ?? base + "/state"
        backing = customBacking ?? base + "/backing"
        mountpoint = base + "/mnt"
        log = base + "/daemon.log"
        for dir in [base, backing, mountpoint] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        let policy = base + "/policy.json"
        try Data(#"{"fileEncryptionRequired": true, "fileProviderEncryptFiles": true}"#.utf8).write(to: URL(fileURLWithPath: policy))
        try mamfs(["init"])
        try mamfs(["enroll", RobustMount.account, "--policy", policy])
        if mount { try self.mount() }
    }

    deinit {
        close()
        try? FileManager.default.removeItem(atPath: base)
    }

    @discardableResult
    func mamfs(_ arguments: [String], check: Bool = true, timeout: TimeInterval = 60) throws -> ShellResult {
        let quoted = ([Robust.mamfs] + arguments + ["--state", state]).map(shellQuote).joined(separator: " ")
        let result = try shell(quoted, timeout: timeout)
        if check && result.status != 0 {
            throw RobustError(description: "mamfs \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.err)")
        }
        return result
    }

    func sh(_ script: String, timeout: TimeInterval = 120) throws -> ShellResult {
        try shell("cd \"$M\" && " + script, environment: environment, timeout: timeout)
    }

    func mount() throws {
        let account = kind == .managed ? ["--account", RobustMount.account] : []
        let command = ([Robust.mamfs, "mount", backing, mountpoint] + account + ["-o", "log=" + log, "--state", state])
            .map(shellQuote).joined(separator: " ")
        let result = try shell(command + " 2>>" + shellQuote(log), timeout: 30)
        guard result.status == 0, isMounted else {
            let logText = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            close()
            throw RobustError(description: "mamfs mount failed (\(result.status)): \(logText)")
        }
        mounted = true
        daemons = Array(Set(daemons + daemonPIDs))
    }

    var isMounted: Bool {
        let mountinfo = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return mountinfo.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first.map(String.init) == mountpoint }
    }

    /// PIDs of `mamfs mount` daemons serving this mountpoint (from /proc/*/cmdline).
    var daemonPIDs: [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return args.contains("mount") && args.contains(mountpoint) ? pid : nil
        }
    }

    /// SIGKILL to the daemon, then a lazy unmount of the dead mount.
    func crash() -> pid_t? {
        let pid = daemonPIDs.first
        if let pid { kill(pid, SIGKILL) }
        for _ in 0..<100 {
            if let pid, kill(pid, 0) != 0 { break }
            usleep(20_000)
        }
        _ = try? shell("fusermount3 -uz \(shellQuote(mountpoint)) 2>/dev/null", timeout: 20)
        mounted = false
        return pid
    }

    /// Unmounts (fusermount3 -u, then -uz) and makes sure every daemon is gone. Idempotent.
    func close() {
        let pids = Array(Set(daemons + daemonPIDs))
        if mounted || isMounted {
            for attempt in 0..<16 {
                let lazy = attempt >= 8 ? "z" : ""
                _ = try? shell("fusermount3 -u\(lazy) \(shellQuote(mountpoint)) 2>/dev/null", timeout: 20)
                if !isMounted { break }
                usleep(200_000)
            }
        }
        mounted = false
        for pid in pids {
            for _ in 0..<50 where kill(pid, 0) == 0 { usleep(100_000) }
            if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        }
        daemons = []
    }

    /// Log lines the daemon wrote so far.
    var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
}

/// Parses a backing file's header with the library and checks that its length is valid.
/// Returns a description of the fault, or nil when the file is well-formed.
func backingFault(_ path: String) -> String? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return "cannot open: errno \(errno)" }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return "fstat failed" }
    var prefix = [UInt8](repeating: 0, count: 8)
    let n = prefix.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 8, 0) }
    if n > 0 && n < 8 && Array(prefix.prefix(n)) == Array(ProtectedFileHeader.magic.prefix(n)) {
        return "half-written magic (\(n) bytes)"
    }
    do {
        guard let header = try ProtectedFileHeader.read(fd: fd) else {
            return st.st_size == 0 ? nil : "untagged file with \(st.st_size) bytes (every file made through the mount is tagged)"
        }
        let body = Int64(st.st_size) - Int64(header.length)
        if body < 0 { return "shorter than its header" }
        if header.isEncrypted, BlockLayout.plaintextSize(bodyLength: body) == nil {
            return "invalid encrypted body length \(body) (torn block)"
        }
        return nil
    } catch {
        return "header does not parse: \(error)"
    }
}

/// Every regular file below `root` (relative paths).
func regularFiles(under root: String) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
    var result: [String] = []
    for case let path as String in enumerator {
        var st = stat()
        if lstat(root + "/" + path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { result.append(path) }
    }
    return result.sorted()
}
