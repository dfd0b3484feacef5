import Foundation
import Glibc
import MAMProtection
import MAMTestSupport

/// Paths the robustness tests need: the built `mamfs`, the repository root, the tools.
enum Robust {
    /// The built `mamfs` (`MamfsBinary.path`).
    static var mamfs: String { MamfsBinary.path }

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

/// Milliseconds since `start`, for the per-part timings the tests print.
func elapsed(_ start: Date) -> String { String(format: "%.1f s", Date().timeIntervalSince(start)) }

/// A state, a backing directory and a `mamfs mount` daemon for one test. Remountable (crash
/// rounds); `close()` always unmounts (fusermount3 -u, then -uz) and kills the daemon by PID.
final class RobustMount: @unchecked Sendable {
    enum Kind: String, CaseIterable, Sendable {
        case managed, unmanaged
    }

    static let account = MamfsCLI.managedAccount
    static let otherAccount = MamfsCLI.otherAccount

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
        try MamfsCLI.initAndEnroll(state: state, account: RobustMount.account, policyFile: base + "/policy.json")
        if mount { try self.mount() }
    }

    deinit {
        close()
        try? FileManager.default.removeItem(atPath: base)
    }

    @discardableResult
    func mamfs(_ arguments: [String], check: Bool = true, timeout: TimeInterval = 60) throws -> ProcessResult {
        try MamfsCLI.run(arguments, state: state, check: check, timeout: timeout)
    }

    func sh(_ script: String, timeout: TimeInterval = 120) throws -> ProcessResult {
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
            throw TestSupportError("mamfs mount failed (\(result.status)): \(logText)")
        }
        mounted = true
        daemons = Array(Set(daemons + daemonPIDs))
    }

    var isMounted: Bool { FuseMounts.isMounted(mountpoint) }

    /// PIDs of `mamfs mount` daemons serving this mountpoint (from /proc/*/cmdline).
    var daemonPIDs: [pid_t] { FuseMounts.daemonPIDs(serving: mountpoint) }

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

    /// Unmounts (`FuseMounts.tearDown`) and makes sure every daemon is gone. Idempotent.
    func close() {
        FuseMounts.tearDown(mountpoint, daemons: daemons)
        mounted = false
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
