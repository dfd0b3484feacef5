import Foundation
import Glibc
import MAMProtection

/// `mamfs unmount`, and removing a dead mount for `mamfs mount --force`.
extension MountDaemon {
    /// What an unmount did.
    public enum UnmountResult: Sendable, Equatable {
        /// Unmounted, and every daemon that served the mount has exited (`daemons` empty when
        /// they could not be found, so nothing was waited for).
        case unmounted(daemons: [pid_t])
        /// The mount was dead (its daemon had exited); it was removed.
        case deadMountRemoved
        /// The mount was busy (a process has its working directory or a file open in it): it
        /// was detached lazily (gone from the namespace at once, released when the last user
        /// leaves); its daemon exits then, so it was not waited for.
        case detachedLazily
    }

    /// Seconds `unmount` waits for the daemon by default.
    public static let defaultUnmountTimeout: Double = 10

    /// Unmounts the FUSE mount at `mountpoint` (as given: relative, or a symbolic link to it)
    /// with `fusermount3 -u`, lazily (`-uz`) when it is busy, and waits until the daemons that
    /// served it (found before unmounting, see `FuseConnection`) have exited, at most `timeout`
    /// seconds. fusermount3's own messages are not passed on.
    /// - Returns: what was done.
    /// - Throws: `MountFailure` with `.noInput` when nothing FUSE is mounted there ("no such
    ///   directory", "not a mamfs mount") or fusermount3 refused (not the caller's mount);
    ///   with `.tempFail` when the mount is gone but a daemon still runs after `timeout`.
    public static func unmount(mountpoint: String, timeout: Double = defaultUnmountTimeout) throws -> UnmountResult {
        let (path, state) = MountpointState.find(mountpoint)
        switch state {
        case .notMounted:
            var st = stat()
            let isDirectory = stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
            throw MountFailure(description: isDirectory ? "not a mamfs mount" : "no such directory", exitCode: .noInput)
        case .dead:
            _ = try detach(path)
            return .deadMountRemoved
        case .live(_, let daemons):
            if try detach(path) == .lazily { return .detachedLazily }
            let running = ProcessExit.wait(for: daemons, timeout: timeout)
            guard running.isEmpty else {
                let pids = running.map(String.init).joined(separator: " ")
                throw MountFailure(description: "unmounted, but its daemon (pid\(running.count == 1 ? "" : "s") \(pids)) is still running after \(seconds(timeout)) s; it exits once it has finished (see the mount's log), or stop it with 'kill \(pids)'",
                                   exitCode: .tempFail)
            }
            return .unmounted(daemons: daemons)
        }
    }

    /// Removes the dead mount at `path` (as the kernel lists it) for `mount --force`.
    /// - Throws: `MountFailure` (`.cantCreate`) when fusermount3 cannot remove it.
    static func removeDeadMount(_ path: String) throws {
        do {
            _ = try detach(path)
        } catch let failure as MountFailure {
            throw MountFailure(description: "\(path): the dead mount there could not be removed (\(failure.description))", exitCode: .cantCreate)
        }
    }

    enum Detach { case cleanly, lazily }

    /// `fusermount3 -u PATH`, else `fusermount3 -uz PATH`.
    /// - Throws: `MountFailure` (`.noInput`) with fusermount3's reason when both fail.
    static func detach(_ path: String) throws -> Detach {
        let first = runQuietly(["fusermount3", "-u", path])
        if first.status == 0 { return .cleanly }
        let lazy = runQuietly(["fusermount3", "-uz", path])
        if lazy.status == 0 { return .lazily }
        let reason = first.stderr.split(separator: "\n").last.map { line -> String in
            let text = String(line)
            return text.hasPrefix("fusermount3: ") ? String(text.dropFirst("fusermount3: ".count)) : text
        }
        throw MountFailure(description: "cannot unmount: \(reason ?? "not a mamfs mount, or not yours")", exitCode: .noInput)
    }

    /// Runs a program from PATH with stdin and stdout on /dev/null and stderr collected.
    /// - Returns: its exit status (127 when it could not start, 128 + N when killed by signal
    ///   N) and what it wrote to stderr.
    static func runQuietly(_ arguments: [String]) -> (status: Int32, stderr: String) {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { return (127, "") }
        // Neither end leaks into the child beyond its stderr (dup2 clears the flag on fd 2).
        for fd in pipeFDs { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 2)
        var argv = arguments.map { strdup($0) }
        argv.append(nil)
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
        close(pipeFDs[1])
        let output = spawned == 0 ? readToEnd(pipeFDs[0]) : []
        close(pipeFDs[0])
        guard spawned == 0 else { return (127, "") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (code, String(decoding: output, as: UTF8.self))
    }

    /// `value` seconds as a short number ("10", "0.5").
    public static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
