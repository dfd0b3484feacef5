import CSystem
import Foundation
import Glibc

/// Runs a compliance program (a `command` check, a remediation, gsettings): no shell, stdin
/// from /dev/null, stdout captured (first 64 KiB), stderr inherited, in its own process group
/// so a timeout kills the program and whatever it started.
enum ComplianceProgram {
    /// How a run ended.
    enum Ending: Equatable {
        /// The program exited with this status (0...255).
        case exited(Int32)
        /// A signal ended it (not our timeout).
        case signalled(Int32)
        /// It was still running after the timeout and was killed (SIGKILL to its group).
        case timedOut
        /// It could not be started (errno of posix_spawn).
        case notStarted(Int32)
    }

    /// Bytes of stdout kept; the rest is read and dropped.
    static let outputLimit = 64 * 1024

    /// Runs `argv` (argv[0] an absolute path) for at most `timeout` seconds.
    /// - Returns: how it ended and the first line of its stdout (without the newline, cut to
    ///   `InputQuote.limit` characters by the callers that show it).
    static func run(_ argv: [String], timeout: Double) -> (ending: Ending, firstLine: String) {
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { return (.notStarted(errno), "") }
        for fd in pipeFDs { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        _ = mamfs_spawn_closefrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own group (killed as one on a timeout), every signal at its default and none
        // blocked, whatever this process ignores or blocks.
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, 0)
        var cArguments = argv.map { strdup($0) }
        cArguments.append(nil)
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, &attributes, cArguments, environ)
        close(pipeFDs[1])
        defer { close(pipeFDs[0]) }
        guard spawned == 0 else { return (.notStarted(spawned), "") }

        let deadline = Date().addingTimeInterval(timeout)
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var status: Int32 = 0
        var exited = false
        var pipeOpen = true
        while true {
            if !exited {
                let waited = waitpid(pid, &status, WNOHANG)
                if waited == pid { exited = true }
            }
            // Once the program has exited, only what is already in the pipe is read (a child
            // it left behind may hold the pipe open).
            if pipeOpen {
                var descriptor = pollfd(fd: pipeFDs[0], events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, exited ? 0 : 20)
                if ready > 0 {
                    let n = read(pipeFDs[0], &chunk, chunk.count)
                    if n > 0 {
                        if output.count < outputLimit { output += chunk[0..<min(n, outputLimit - output.count)] }
                        continue
                    }
                    if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) { pipeOpen = false }
                } else if exited {
                    pipeOpen = false
                }
            } else if !exited {
                usleep(10_000)
            }
            if exited && !pipeOpen { break }
            if Date() >= deadline {
                kill(-pid, SIGKILL)
                if !exited { while waitpid(pid, &status, 0) < 0 && errno == EINTR {} }
                return (.timedOut, firstLine(output))
            }
        }
        let ending: Ending = (status & 0x7f) == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
        return (ending, firstLine(output))
    }

    static func firstLine(_ bytes: [UInt8]) -> String {
        let line = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        return String(decoding: line, as: UTF8.self).trimmingWhitespace()
    }
}
