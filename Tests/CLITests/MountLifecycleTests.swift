import Foundation
import MAMProtection
import Testing
import MAMTestSupport

/// The life of a mount seen from the command line: a second mount on the same mountpoint, a
/// mount whose daemon was killed, a busy unmount, waiting for the daemon, and what `mount`
/// says about new files without `--account`.
@Suite("CLI: mount lifecycle")
struct MountLifecycleTests {
    /// A sandbox with the demo account enrolled and empty backing and mountpoint directories
    /// whose teardown unmounts and stops every daemon of the mountpoint.
    final class Mounting {
        let sandbox: Sandbox
        let backing: String
        let mountpoint: String

        init() throws {
            (sandbox, backing, mountpoint) = try MountTests.mountSandbox()
        }

        deinit { FuseMounts.tearDown(mountpoint) }

        @discardableResult
        func run(_ arguments: [String]) throws -> ProcessResult { try sandbox.run(arguments) }

        /// `mamfs mount BACKING MOUNTPOINT --account ACCOUNT` that must succeed; returns its daemon.
        func mount(_ extra: [String] = []) throws -> pid_t {
            let result = try run(["mount", backing, mountpoint, "--account", Fixtures.upn] + extra)
            guard result.status == 0 else { throw SandboxError.failed("mount", result) }
            return try daemon()
        }

        /// The one daemon serving the mountpoint (found by its command line, as the teardown does).
        func daemon() throws -> pid_t {
            let pids = FuseMounts.daemonPIDs(serving: mountpoint)
            guard pids.count == 1, let pid = pids.first else {
                throw SandboxError.failed("one daemon expected, found \(pids)", ProcessResult(status: 0, stdout: Data(), stderr: Data()))
            }
            return pid
        }

        /// `mamfs mount` without --force over a dead mount: 64, naming the cure.
        func expectRefusedAsDead() throws {
            let refused = try run(["mount", backing, mountpoint, "--account", Fixtures.upn])
            #expect(refused.status == 64)
            #expect(refused.errLines == ["mamfs: mount: \(mountpoint): a dead mount is there (the mamfs daemon that served \(backing) exited); remove it with 'mamfs unmount \(mountpoint)', or mount with --force"])
        }

        /// `mamfs mount --force` over a dead mount: removed (one note), mounted once, a file
        /// written through the new mount reads back.
        func expectForcedOverDead() throws {
            let forced = try run(["mount", backing, mountpoint, "--account", Fixtures.upn, "--force"])
            #expect(forced.status == 0, "\(forced.err)")
            #expect(forced.errLines == ["mamfs: mount: note: \(mountpoint) was a dead mount (its daemon had exited); removed it"])
            #expect(mountEntries.count == 1)
            try Data("alive\n".utf8).write(to: URL(fileURLWithPath: mountpoint + "/f"))
            #expect(try sandbox.read(mountpoint + "/f") == Data("alive\n".utf8))
        }

        /// Entries of the mount table at the mountpoint.
        var mountEntries: [MountInfo.Entry] {
            MountInfo.current()?.entries.filter { $0.mountPoint == mountpoint } ?? []
        }

        /// SIGKILL to the daemon, then waits until the mountpoint answers ENOTCONN.
        func killDaemon(_ pid: pid_t) throws {
            kill(pid, SIGKILL)
            for _ in 0..<250 {
                var st = stat()
                if stat(mountpoint, &st) != 0 && errno == ENOTCONN { return }
                usleep(20_000)
            }
            throw SandboxError.failed("the mount did not go dead", ProcessResult(status: 0, stdout: Data(), stderr: Data()))
        }
    }

    /// True when `pid` is gone (not even a zombie): kill(pid, 0) fails with ESRCH.
    static func isGone(_ pid: pid_t) -> Bool {
        kill(pid, 0) != 0 && errno == ESRCH
    }

    @Test("a second mount on a mounted mountpoint is refused (64) and no second daemon is stacked",
          .enabled(if: fuseUsable))
    func secondMountRefused() throws {
        let m = try Mounting()
        let first = try m.mount()
        let again = try m.run(["mount", m.backing, m.mountpoint, "--account", Fixtures.upn])
        #expect(again.status == 64)
        #expect(again.errLines == ["mamfs: mount: \(m.mountpoint): already mounted (a mamfs mount of \(m.backing) is there); unmount it first with 'mamfs unmount \(m.mountpoint)'"])
        #expect(again.stdout.isEmpty)
        let otherBacking = m.sandbox.path("other-backing")
        try FileManager.default.createDirectory(atPath: otherBacking, withIntermediateDirectories: true)
        let other = try m.run(["mount", otherBacking, m.mountpoint, "--force"])
        #expect(other.status == 64)
        #expect(other.errLines.last == "mamfs: mount: \(m.mountpoint): already mounted (a mamfs mount of \(m.backing) is there); unmount it first with 'mamfs unmount \(m.mountpoint)'")
        #expect(m.mountEntries.count == 1)
        #expect(FuseMounts.daemonPIDs(serving: m.mountpoint) == [first])
    }

    @Test("two mounts of one mountpoint started at once: one mounts, the other waits for it and is refused (64); one mount, one daemon",
          .enabled(if: fuseUsable))
    func concurrentMountsOfOneMountpoint() throws {
        let m = try Mounting()
        let otherBacking = m.sandbox.path("other-backing")
        try FileManager.default.createDirectory(atPath: otherBacking, withIntermediateDirectories: true)
        var environment = m.sandbox.environment
        environment["MAMFS"] = MamfsBinary.path
        let script = """
        "$MAMFS" mount "$1" "$3" --account "$4" --state "$5" 2>"$6/a.err" & a=$!
        "$MAMFS" mount "$2" "$3" --account "$4" --state "$5" 2>"$6/b.err" & b=$!
        wait $a; ra=$?; wait $b; rb=$?; echo "$ra $rb"; cat "$6/a.err" "$6/b.err"
        """
        // Several rounds: without the lock both commands passed the check in most of them.
        for round in 0..<4 {
            let result = try runProcess("/bin/bash", ["-c", script, "-", m.backing, otherBacking, m.mountpoint, Fixtures.upn,
                                                      m.sandbox.state, m.sandbox.root], environment: environment)
            let lines = result.out.split(separator: "\n").map(String.init)
            #expect(["0 64", "64 0"].contains(lines.first ?? ""), "round \(round): \(result.out)")
            #expect(lines.dropFirst().count == 1 && lines.last?.contains(": already mounted (a mamfs mount of ") == true,
                    "round \(round): \(result.out)")
            #expect(m.mountEntries.count == 1, "round \(round): \(m.mountEntries.count) mounts")
            #expect(FuseMounts.daemonPIDs(serving: m.mountpoint).count == 1, "round \(round)")
            let unmount = try m.run(["unmount", m.mountpoint])
            #expect(unmount.status == 0, "round \(round): \(unmount.err)")
            #expect(m.mountEntries.isEmpty, "round \(round): left \(m.mountEntries.count) mounts")
            if !m.mountEntries.isEmpty { FuseMounts.tearDown(m.mountpoint) }
        }
    }

    @Test("a dead mount (daemon killed with SIGKILL): mount refuses it (64) naming the cure, unmount removes it (0), mount --force removes it and mounts",
          .enabled(if: fuseUsable))
    func deadMount() throws {
        let m = try Mounting()
        try m.killDaemon(try m.mount())

        try m.expectRefusedAsDead()
        #expect(m.mountEntries.count == 1, "left as it was")

        let unmount = try m.run(["unmount", m.mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
        #expect(unmount.errLines == ["mamfs: unmount: note: \(m.mountpoint) was a dead mount (its daemon had exited); removed it"])
        #expect(unmount.stdout.isEmpty)
        #expect(m.mountEntries.isEmpty)

        try m.killDaemon(try m.mount())
        try m.expectForcedOverDead()
        let info = try jsonArray(try m.run(["info", "--json", m.backing + "/f"]))
        #expect(info.first?["owner"] as? String == Fixtures.account)
        #expect(try m.run(["unmount", m.mountpoint]).status == 0)
    }

    @Test("a dead mount is found as dead at once, while the kernel still holds its root's attributes: mount says so (64), --force replaces it (0)",
          .enabled(if: fuseUsable))
    func deadMountWithCachedAttributes() throws {
        let m = try Mounting()
        let pid = try m.mount()
        var st = stat()
        // The root's attributes, cached by the kernel for the mount's attr_timeout (1 s).
        #expect(stat(m.mountpoint, &st) == 0)
        kill(pid, SIGKILL)
        // Dead (its descriptors closed) once it is a zombie or gone; nobody may have reaped it yet.
        #expect(Patience.waitUntil(5, every: 0.005) {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.range(of: ") ", options: .backwards) else { return true }
            return stat[close.upperBound...].hasPrefix("Z")
        })
        try m.expectRefusedAsDead()
        try m.expectForcedOverDead()
        #expect(try m.run(["unmount", m.mountpoint]).status == 0)
    }

    @Test("unmount of a busy mount detaches it lazily and says so in one line, nothing from fusermount3 (0)",
          .enabled(if: fuseUsable))
    func busyUnmount() throws {
        let m = try Mounting()
        let daemon = try m.mount()
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sleep")
        holder.arguments = ["60"]
        holder.currentDirectoryURL = URL(fileURLWithPath: m.mountpoint)
        try holder.run()
        // SIGKILL: a child of a test thread may inherit a mask that blocks SIGTERM.
        defer {
            if holder.isRunning { kill(holder.processIdentifier, SIGKILL) }
            holder.waitUntilExit()
        }
        let unmount = try m.run(["unmount", m.mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
        #expect(unmount.errLines == ["mamfs: unmount: note: \(m.mountpoint) is busy (a process has its working directory or a file open in it): detached lazily; its daemon exits when the last one leaves"])
        #expect(unmount.stdout.isEmpty)
        #expect(m.mountEntries.isEmpty)
        #expect(kill(daemon, 0) == 0, "the daemon serves the process still inside")
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        FuseMounts.reap([daemon])
    }

    @Test("mount with its stderr a pipe read to the end returns: the daemon lets go of the pipe once the mount answers",
          .enabled(if: fuseUsable))
    func stderrPipeLetGo() throws {
        let m = try Mounting()
        let script = "out=$(\(shellQuote(MamfsBinary.path)) --state \(shellQuote(m.sandbox.state)) mount \(shellQuote(m.backing)) \(shellQuote(m.mountpoint)) 2>&1); echo \"rc=$? [$out]\""
        let mount = try shell(script, environment: m.sandbox.environment, timeout: 20)
        #expect(mount.out == "rc=0 [mamfs: mount: note: no --account: new files outside protected directories are unmanaged (personal) and stored plain; mount with --account ACCOUNT to make them the account's managed files]\n", "\(mount.err)")
        let daemon = try m.daemon()
        let stderrTarget = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon)/fd/2")
        #expect(stderrTarget == "/dev/null")
        try Data("still served\n".utf8).write(to: URL(fileURLWithPath: m.mountpoint + "/f"))
        #expect(try m.sandbox.read(m.mountpoint + "/f") == Data("still served\n".utf8))
        #expect(try m.run(["unmount", m.mountpoint]).status == 0)
    }

    @Test("a daemon started by a process that blocks SIGTERM still ends on SIGTERM: it unmounts and exits",
          .enabled(if: fuseUsable))
    func stopSignalsUnblocked() throws {
        let m = try Mounting()
        let script = """
            import signal, subprocess, sys
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP, signal.SIGINT, signal.SIGTERM})
            sys.exit(subprocess.run(sys.argv[1:]).returncode)
            """
        let mount = try shell("python3 -c \(shellQuote(script)) \(shellQuote(MamfsBinary.path)) --state \(shellQuote(m.sandbox.state)) mount \(shellQuote(m.backing)) \(shellQuote(m.mountpoint)) --account \(shellQuote(Fixtures.upn))",
                              environment: m.sandbox.environment, timeout: 60)
        #expect(mount.status == 0, "\(mount.err)")
        let daemon = try m.daemon()
        let blocked = (try? String(contentsOfFile: "/proc/\(daemon)/status", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
            .flatMap { UInt64($0.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16) }
        #expect(blocked.map { $0 & (1 << (UInt64(SIGTERM) - 1)) } == 0, "SIGTERM is not blocked in the daemon")
        #expect(kill(daemon, SIGTERM) == 0)
        var gone = false
        for _ in 0..<500 where !gone {
            gone = Self.isGone(daemon)
            if !gone { usleep(20_000) }
        }
        #expect(gone, "the daemon exited on SIGTERM")
        #expect(m.mountEntries.isEmpty, "and took its mount with it")
    }

    @Test("unmount returns once the daemon has exited: its pid is gone (ESRCH) right after", .enabled(if: fuseUsable))
    func unmountWaitsForTheDaemon() throws {
        let m = try Mounting()
        let daemon = try m.mount()
        let unmount = try m.run(["unmount", m.mountpoint])
        let gone = Self.isGone(daemon)
        #expect(unmount.status == 0, "\(unmount.err)")
        #expect(unmount.stderr.isEmpty)
        #expect(unmount.stdout.isEmpty)
        #expect(gone, "daemon \(daemon) still exists after unmount returned")
        #expect(m.mountEntries.isEmpty)
    }

    @Test("unmount whose daemon does not exit in --timeout seconds says so and exits 75; the mount is gone",
          .enabled(if: fuseUsable))
    func unmountTimeout() throws {
        let m = try Mounting()
        let daemon = try m.mount()
        kill(daemon, SIGSTOP)
        defer {
            kill(daemon, SIGCONT)
            FuseMounts.reap([daemon])
        }
        let unmount = try m.run(["unmount", m.mountpoint, "--timeout", "1"])
        #expect(unmount.status == 75, "\(unmount.err)")
        #expect(unmount.errLines == ["mamfs: unmount: \(m.mountpoint): unmounted, but its daemon (pid \(daemon)) is still running after 1 s; it exits once it has finished (see the mount's log), or stop it with 'kill \(daemon)'"])
        #expect(m.mountEntries.isEmpty)
        #expect(kill(daemon, 0) == 0)
        let bad = try m.run(["unmount", m.mountpoint, "--timeout", "soon"])
        #expect(bad.status == 64)
        #expect(bad.errLines.first == "mamfs: unmount: --timeout: expected a number of seconds, got 'soon'")
    }

    @Test("mount without --account says in one stderr line that new files are unmanaged and plain, and how to make them managed",
          .enabled(if: fuseUsable))
    func noAccountNote() throws {
        let m = try Mounting()
        let mount = try m.run(["mount", m.backing, m.mountpoint])
        #expect(mount.status == 0, "\(mount.err)")
        #expect(mount.errLines == ["mamfs: mount: note: no --account: new files outside protected directories are unmanaged (personal) and stored plain; mount with --account ACCOUNT to make them the account's managed files"])
        #expect(mount.stdout.isEmpty)
        try Data("plain\n".utf8).write(to: URL(fileURLWithPath: m.mountpoint + "/f"))
        #expect(try m.sandbox.read(m.backing + "/f").contains("plain"))
        #expect(try m.run(["unmount", m.mountpoint]).status == 0)

        let managed = try m.run(["mount", m.backing, m.mountpoint, "--account", Fixtures.upn])
        #expect(managed.status == 0)
        #expect(managed.stderr.isEmpty)
        #expect(try m.run(["unmount", m.mountpoint]).status == 0)
        let explicit = try m.run(["mount", m.backing, m.mountpoint, "--account", ""])
        #expect(explicit.status == 0)
        #expect(explicit.stderr.isEmpty, "--account '' asks for unmanaged files: no note")
        #expect(try m.run(["unmount", m.mountpoint]).status == 0)

        let help = try m.sandbox.run(["mount", "--help"], withState: false)
        #expect(help.out.contains("Without --account, new files outside protected directories are unmanaged (personal) and stored plain"))
    }

    @Test("-v before the verb: mount prints the daemon's pid and the daemon logs its start and end; unmount says the daemon exited",
          .enabled(if: fuseUsable))
    func verboseMountAndUnmount() throws {
        let m = try Mounting()
        let log = m.sandbox.path("daemon.log")
        // Through $(...): a daemon that kept the caller's pipe open would make this wait until unmount.
        let script = "out=$(\(shellQuote(MamfsBinary.path)) -v --state \(shellQuote(m.sandbox.state)) mount \(shellQuote(m.backing)) \(shellQuote(m.mountpoint)) --account \(shellQuote(Fixtures.upn)) -o log=\(shellQuote(log)) 2>&1); echo \"rc=$? [$out]\""
        let mount = try shell(script, environment: m.sandbox.environment, timeout: 60)
        let daemon = try m.daemon()
        #expect(mount.out == "rc=0 [Mounted \(m.backing) on \(m.mountpoint) (daemon pid \(daemon))]\n", "\(mount.err)")
        let started = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(started.contains("mamfs: mounted \(m.backing) on \(m.mountpoint) (pid \(daemon); new files outside protected directories: \(Fixtures.account))\n"), "\(started)")

        let unmount = try m.sandbox.run(["--verbose", "unmount", m.mountpoint], withState: false)
        #expect(unmount.status == 0, "\(unmount.err)")
        // The daemons are the holders of the mount's FUSE connection number. The kernel hands a
        // freed number to the next mount at once; a daemon of another mount still exiting after
        // its unmount holds a descriptor of an aborted connection with that number, and is not
        // listed (nor waited for).
        #expect(unmount.out == "Unmounted \(m.mountpoint) (daemon pid \(daemon) exited)\n")
        #expect(kill(daemon, 0) != 0)
        #expect(unmount.stderr.isEmpty)
        let ended = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(ended.hasSuffix("mamfs: unmounted \(m.mountpoint); the daemon exits\n"), "\(ended)")
    }
}
