import Foundation
import Glibc
import MAMProtection
@testable import MAMFS

/// Output of a shell script run by a test.
struct ShellResult {
    let status: Int32
    let out: String
    let err: String
}

enum MamfsBinary {
    /// The built `mamfs`: `$MAMFS_BIN`, else the first directory above the test bundle (or
    /// argv[0]) holding an executable `mamfs`.
    static let path: String = {
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
}

/// Runs `script` with bash; outputs go through files so large outputs cannot deadlock.
func shell(_ script: String, environment extra: [String: String] = [:], timeout: TimeInterval = 300) throws -> ShellResult {
    let id = UUID().uuidString
    let outPath = NSTemporaryDirectory() + "mamfs-sh-\(id).out"
    let errPath = NSTemporaryDirectory() + "mamfs-sh-\(id).err"
    FileManager.default.createFile(atPath: outPath, contents: nil)
    FileManager.default.createFile(atPath: errPath, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", script]
    var environment = ProcessInfo.processInfo.environment
    environment["MAMFS_STATE"] = nil
    environment["LC_ALL"] = "C"
    environment["TZ"] = "UTC"
    for (key, value) in extra { environment[key] = value }
    process.environment = environment
    process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
    process.standardOutput = FileHandle(forWritingAtPath: outPath)
    process.standardError = FileHandle(forWritingAtPath: errPath)
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning {
        if Date() > deadline {
            kill(-process.processIdentifier, SIGKILL)
            process.terminate()
            break
        }
        usleep(5_000)
    }
    process.waitUntilExit()
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return ShellResult(status: process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus,
                       out: out, err: err)
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
}

/// A real mount for one test: unique temp directories, a fresh state, the mount, and a
/// teardown that always unmounts (timeout, then lazy unmount) and stops the daemon.
final class MountedFixture: @unchecked Sendable {
    enum Kind: String, CaseIterable, Sendable {
        /// `--account` = an enrolled account whose policy requires encryption.
        case managed
        /// No account: new files are tagged unmanaged and stay plain.
        case unmanaged
    }

    static let account = "8c7f3e1a-0000-4000-8000-00000000a11c"
    static let otherAccount = "8c7f3e1a-0000-4000-8000-00000000b0b0"

    let kind: Kind
    let base: String
    let state: String
    let backing: String
    let mountpoint: String
    /// A plain directory for comparisons with a non-FUSE filesystem.
    let plain: String
    let log: String
    private var mounted = false
    private var inProcessDone: DispatchSemaphore?
    /// True when the daemon writes its diagnostics to `log` (not in-process mounts).
    private(set) var logsToFile = false

    var isManaged: Bool { kind == .managed }
    var environment: [String: String] {
        ["M": mountpoint, "B": backing, "P": plain, "S": state, "MAMFS": MamfsBinary.path, "ACCT": MountedFixture.account,
         "OTHER": MountedFixture.otherAccount, "BASE": base]
    }

    /// `launcher`: a command the `mamfs mount` daemon is started under (e.g. `prlimit
    /// --nofile=1024:1024`); such a fixture needs the daemon (no in-process fallback).
    init(_ kind: Kind, backing customBacking: String? = nil, options: [String] = [], launcher: [String] = []) throws {
        self.kind = kind
        base = NSTemporaryDirectory() + "mamfs-fs-\(UUID().uuidString.prefix(12))"
        state = base + "/state"
        backing = customBacking ?? base + "/backing"
        mountpoint = base + "/mnt"
        plain = base + "/plain"
        log = base + "/daemon.log"
        for dir in [base, backing, mountpoint, plain] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        let policy = base + "/policy.json"
        try Data(#"{"fileEncryptionRequired": true, "fileProviderEncryptFiles": true}"#.utf8).write(to: URL(fileURLWithPath: policy))
        try mamfs(["init"])
        try mamfs(["enroll", MountedFixture.account, "--policy", policy])
        try mount(options: options, launcher: launcher)
    }

    deinit {
        close()
        try? FileManager.default.removeItem(atPath: base)
    }

    /// Runs the mamfs CLI on this fixture's state.
    @discardableResult
    func mamfs(_ arguments: [String], check: Bool = true) throws -> ShellResult {
        try runMamfs(arguments, state: state, check: check)
    }

    /// Runs a bash script with $M, $B, $P, $S, $MAMFS, $ACCT set, in the mountpoint.
    func sh(_ script: String, timeout: TimeInterval = 300) throws -> ShellResult {
        try shell("cd \"$M\" && " + script, environment: environment, timeout: timeout)
    }

    /// The session runs on a thread of the test process (MAMFS_TEST_IN_PROCESS=1) instead of
    /// a `mamfs mount` daemon; checks that need the daemon's own process are skipped then.
    static var useInProcess: Bool {
        ProcessInfo.processInfo.environment["MAMFS_TEST_IN_PROCESS"] == "1"
    }

    private func mount(options: [String], launcher: [String]) throws {
        let account = isManaged ? ["--account", MountedFixture.account] : []
        let opts = options.isEmpty ? [] : ["-o", options.joined(separator: ",")]
        if !MountedFixture.useInProcess {
            // The daemon's diagnostics go to `log` (-o log=FILE); the CLI's own errors too (2>>).
            let logOption = ["-o", "log=" + log]
            let command = (launcher + [MamfsBinary.path, "mount", backing, mountpoint] + account + opts + logOption + ["--state", state]).map(shellQuote).joined(separator: " ")
            let result = try shell(command + " 2>>" + shellQuote(log))
            if result.status == 0 {
                mounted = true
                logsToFile = true
                return
            }
            let logText = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard logText.contains("not available in this build"), launcher.isEmpty else {
                throw FixtureError(description: "mamfs mount failed (\(result.status)): \(logText)")
            }
        }
        try mountInProcess(options: options)
    }

    /// Until the CLI wires `mamfs mount`, the session runs on a thread of the test process.
    private func mountInProcess(options fuseOptions: [String]) throws {
        let context = try ProtectionContext.open(stateDirectory: StateDirectory(path: state), passphraseFile: nil)
        var options = MountOptions(backingDirectory: backing, mountpoint: mountpoint,
                                   account: isManaged ? MountedFixture.account : "", foreground: true,
                                   fuseOptions: fuseOptions, stateDirectory: state)
        let plan = try MountDaemon.prepare(&options, context: context)
        let ready = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let finalOptions = options
        let thread = Thread {
            _ = try? MountDaemon.serve(options: finalOptions, plan: plan, context: context, installSignalHandlers: false) { _ in
                ready.signal()
            }
            ready.signal()
            done.signal()
        }
        thread.start()
        ready.wait()
        inProcessDone = done
        mounted = isMounted
        guard mounted else { throw FixtureError(description: "in-process mount failed") }
    }

    var isMounted: Bool {
        let mountinfo = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return mountinfo.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first.map(String.init) == mountpoint }
    }

    /// The `mamfs mount` daemon serving this mount (nil for in-process mounts).
    var daemonPID: pid_t? { daemonPIDs.first }

    /// Descriptors the daemon has open.
    func daemonDescriptorCount() -> Int? {
        guard let pid = daemonPID else { return nil }
        return (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// PIDs of daemons serving this mountpoint.
    private var daemonPIDs: [pid_t] { mamfsDaemonPIDs(serving: mountpoint) }

    /// Unmounts (fusermount3 -u, then -uz) and makes sure the daemon is gone. Idempotent.
    func close() {
        guard mounted else { return }
        mounted = false
        let pids = daemonPIDs
        for attempt in 0..<20 {
            let lazy = attempt >= 10 ? "z" : ""
            _ = try? shell("fusermount3 -u\(lazy) \(shellQuote(mountpoint)) 2>/dev/null", timeout: 20)
            if !isMounted { break }
            usleep(200_000)
        }
        if let done = inProcessDone {
            _ = done.wait(timeout: .now() + 20)
        }
        for pid in pids {
            for _ in 0..<50 where kill(pid, 0) == 0 { usleep(100_000) }
            if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        }
    }

    /// The parsed header of a backing file (nil when untagged).
    func backingHeader(_ relative: String) throws -> ProtectedFileHeader? {
        let fd = open(backing + "/" + relative, O_RDONLY)
        guard fd >= 0 else { throw FixtureError(description: "cannot open backing \(relative): errno \(errno)") }
        defer { Glibc.close(fd) }
        return try ProtectedFileHeader.read(fd: fd)
    }

    /// Every regular backing file below `relative` with its header.
    func backingHeaders(under relative: String = "") throws -> [(String, ProtectedFileHeader?)] {
        let root = relative.isEmpty ? backing : backing + "/" + relative
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        var result: [(String, ProtectedFileHeader?)] = []
        for case let path as String in enumerator {
            var st = stat()
            guard lstat(root + "/" + path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            let rel = relative.isEmpty ? path : relative + "/" + path
            result.append((rel, try backingHeader(rel)))
        }
        return result
    }

    /// Asserts-friendly summary: the owner and encryption every new file must have.
    var expectedOwner: String { isManaged ? MountedFixture.account : "" }
}

func shellQuote(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Runs `body` with a fresh mount and always tears it down.
func withMount<R>(_ kind: MountedFixture.Kind, options: [String] = [], _ body: (MountedFixture) throws -> R) throws -> R {
    let fixture = try MountedFixture(kind, options: options)
    defer { fixture.close() }
    return try body(fixture)
}

/// PIDs of `mamfs mount` daemons (other than this process) serving `mountpoint`.
func mamfsDaemonPIDs(serving mountpoint: String) -> [pid_t] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    return entries.compactMap { entry -> pid_t? in
        guard let pid = pid_t(entry), pid != getpid(),
              let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
        let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return args.contains("mount") && args.contains(mountpoint) ? pid : nil
    }
}

/// Runs the mamfs CLI with `--state state`; with `check`, a non-zero exit throws.
@discardableResult
func runMamfs(_ arguments: [String], state: String, check: Bool = true) throws -> ShellResult {
    let quoted = ([MamfsBinary.path] + arguments + ["--state", state]).map(shellQuote).joined(separator: " ")
    let result = try shell(quoted)
    if check && result.status != 0 {
        throw FixtureError(description: "mamfs \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.err)")
    }
    return result
}
