import Foundation
import Glibc
import MAMProtection
@testable import MAMFS
import MAMTestSupport

/// A real mount for one test: unique temp directories, a fresh state, the mount, and a
/// teardown that always unmounts (timeout, then lazy unmount) and stops the daemon.
final class MountedFixture: @unchecked Sendable {
    enum Kind: String, CaseIterable, Sendable {
        /// `--account` = an enrolled account whose policy requires encryption.
        case managed
        /// No account: new files are tagged unmanaged and stay plain.
        case unmanaged
    }

    static let account = MamfsCLI.managedAccount
    static let otherAccount = MamfsCLI.otherAccount

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
    /// `mountEnvironment`: added to the environment `mamfs mount` (and so its daemon) runs with.
    /// `policy`: the managed account's policy JSON at enrollment (default: encrypting).
    init(_ kind: Kind, backing customBacking: String? = nil, options: [String] = [], launcher: [String] = [],
         mountEnvironment: [String: String] = [:], policy: String = MamfsCLI.encryptingPolicy) throws {
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
        try MamfsCLI.initAndEnroll(state: state, account: MountedFixture.account, policyFile: base + "/policy.json", policy: policy)
        try mount(options: options, launcher: launcher, environment: mountEnvironment)
    }

    deinit {
        close()
        try? FileManager.default.removeItem(atPath: base)
    }

    /// Runs the mamfs CLI on this fixture's state.
    @discardableResult
    func mamfs(_ arguments: [String], check: Bool = true) throws -> ProcessResult {
        try MamfsCLI.run(arguments, state: state, check: check)
    }

    /// Runs a bash script with $M, $B, $P, $S, $MAMFS, $ACCT set, in the mountpoint.
    func sh(_ script: String, timeout: TimeInterval = 300) throws -> ProcessResult {
        try shell("cd \"$M\" && " + script, environment: environment, timeout: timeout)
    }

    /// The session runs on a thread of the test process (MAMFS_TEST_IN_PROCESS=1) instead of
    /// a `mamfs mount` daemon; checks that need the daemon's own process are skipped then.
    static var useInProcess: Bool {
        ProcessInfo.processInfo.environment["MAMFS_TEST_IN_PROCESS"] == "1"
    }

    private func mount(options: [String], launcher: [String], environment: [String: String]) throws {
        let account = isManaged ? ["--account", MountedFixture.account] : []
        let opts = options.isEmpty ? [] : ["-o", options.joined(separator: ",")]
        if !MountedFixture.useInProcess {
            // The daemon's diagnostics go to `log` (-o log=FILE); the CLI's own errors too (2>>).
            let logOption = ["-o", "log=" + log]
            let command = (launcher + [MamfsBinary.path, "mount", backing, mountpoint] + account + opts + logOption + ["--state", state]).map(shellQuote).joined(separator: " ")
            let result = try shell(command + " 2>>" + shellQuote(log), environment: environment)
            if result.status == 0 {
                mounted = true
                logsToFile = true
                return
            }
            let logText = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard logText.contains("not available in this build"), launcher.isEmpty else {
                throw TestSupportError("mamfs mount failed (\(result.status)): \(logText)")
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
        guard mounted else { throw TestSupportError("in-process mount failed") }
    }

    var isMounted: Bool { FuseMounts.isMounted(mountpoint) }

    /// The `mamfs mount` daemon serving this mount (nil for in-process mounts).
    var daemonPID: pid_t? { daemonPIDs.first }

    /// Descriptors the daemon has open.
    func daemonDescriptorCount() -> Int? {
        guard let pid = daemonPID else { return nil }
        return (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// Waits (up to 10 s, nominal, stretched by `Patience`) until `condition` holds for the
    /// daemon's descriptor count; returns the last count (-1: no daemon or no /proc entry).
    func waitForDescriptorCount(_ condition: (Int) -> Bool) -> Int {
        var count = -1
        Patience.waitUntil(10) {
            count = daemonDescriptorCount() ?? -1
            return condition(count)
        }
        return count
    }

    /// PIDs of daemons serving this mountpoint.
    private var daemonPIDs: [pid_t] { FuseMounts.daemonPIDs(serving: mountpoint) }

    /// Unmounts (`FuseMounts.unmount`) and makes sure the daemon is gone. Idempotent.
    func close() {
        guard mounted else { return }
        mounted = false
        let pids = daemonPIDs
        FuseMounts.unmount(mountpoint)
        if let done = inProcessDone {
            _ = done.wait(timeout: .now() + 20)
        }
        FuseMounts.reap(pids)
    }

    /// The parsed header of a backing file (nil when untagged).
    func backingHeader(_ relative: String) throws -> ProtectedFileHeader? {
        let fd = open(backing + "/" + relative, O_RDONLY)
        guard fd >= 0 else { throw TestSupportError("cannot open backing \(relative): errno \(errno)") }
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

/// Runs `body` with a fresh mount and always tears it down.
func withMount<R>(_ kind: MountedFixture.Kind, options: [String] = [], _ body: (MountedFixture) throws -> R) throws -> R {
    let fixture = try MountedFixture(kind, options: options)
    defer { fixture.close() }
    return try body(fixture)
}

