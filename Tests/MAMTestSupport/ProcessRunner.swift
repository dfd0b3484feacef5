import Foundation
import CSystem
import Glibc

/// Runs `executable` (a path, not looked up in PATH) with `arguments`, `stdin` as its input
/// and stdout and stderr in temporary files (no pipe deadlocks, any size), and waits for that
/// process only.
///
/// posix_spawn + waitpid rather than Foundation's Process: Process waits for an inherited
/// socket to close, so a daemon the child forks (mamfs mount) would make it wait until the
/// daemon exits. The child gets only stdin, stdout and stderr, default signal handling, and
/// leads a new process group; when `timeout` seconds pass, the whole group gets SIGKILL, the
/// status is 124 and stderr ends with a line saying so.
/// - Parameter environment: the child's whole environment.
/// - Throws: `TestSupportError` when the process cannot be started.
public func runProcess(_ executable: String, _ arguments: [String], stdin: Data = Data(),
                       environment: [String: String], timeout: TimeInterval = 300) throws -> ProcessResult {
    let scratch = try TempDirectory(prefix: "mamfs-run")
    let inPath = scratch.file("stdin")
    let outPath = scratch.file("stdout")
    let errPath = scratch.file("stderr")
    try stdin.write(to: URL(fileURLWithPath: inPath))

    let pid = try spawnProcess(executable, arguments, environment: environment, stdin: inPath, stdout: outPath, stderr: errPath)
    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32 = 0
    var timedOut = false
    while true {
        let waited = waitpid(pid, &status, WNOHANG)
        if waited == pid { break }
        if waited < 0 && errno != EINTR { break }
        if !timedOut && Date() > deadline {
            timedOut = true
            kill(-pid, SIGKILL)
        }
        usleep(2_000)
    }
    let stdout = (try? Data(contentsOf: URL(fileURLWithPath: outPath))) ?? Data()
    var stderr = (try? Data(contentsOf: URL(fileURLWithPath: errPath))) ?? Data()
    if timedOut {
        stderr.append(Data("\n(timed out after \(Int(timeout)) s)".utf8))
        return ProcessResult(status: 124, stdout: stdout, stderr: stderr)
    }
    let exited = (status & 0x7f) == 0
    return ProcessResult(status: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f), stdout: stdout, stderr: stderr)
}

/// Starts `executable` (a path) with `arguments` and the whole `environment`, stdin read from
/// the file `stdin` and stdout and stderr written to the files `stdout` and `stderr`
/// (truncated, or appended to when `truncate` is false; they may be one file), and returns
/// without waiting. The child gets only those three descriptors, default signal handling, and
/// leads a new process group (so `kill(-pid, ...)` reaches its children too).
/// - Throws: `TestSupportError` when the process cannot be started.
public func spawnProcess(_ executable: String, _ arguments: [String], environment: [String: String],
                         stdin: String, stdout: String, stderr: String, truncate: Bool = true) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0o600)
    // Nothing else of the test process (descriptors into a mount, sockets) reaches the child,
    // including descriptors another test thread opens without O_CLOEXEC between now and the
    // spawn: the child closes everything from 3 up itself, after the three opens above.
    mamfs_spawn_closefrom(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // Default signal handling in the child whatever the test runner blocks or ignores (a
    // mount's daemon must get its SIGTERM), as Foundation's Process does.
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    var allSignals = sigset_t()
    sigfillset(&allSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    posix_spawnattr_setsigdefault(&attributes, &allSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    posix_spawnattr_setpgroup(&attributes, 0)

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    guard spawned == 0 else {
        throw TestSupportError("cannot start \(executable): \(String(cString: strerror(spawned)))")
    }
    return pid
}
