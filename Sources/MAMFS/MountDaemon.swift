import CFuse
import CFuseTransport
import Glibc
import MAMProtection
import MAMSystem

/// The mount daemon: validates a mount request, forks the daemon that serves the FUSE session
/// of `mamfs mount`, and unmounts for `mamfs unmount`.
public enum MountDaemon {
    /// Upper bound of the session's worker threads (libfuse's max_threads, its default); each
    /// keeps one receive buffer of max_write + 4 KiB for its lifetime, and as many 1 MiB read
    /// buffers can be in use at once, which bounds the daemon's memory (docs/PERFORMANCE.md).
    static let workerThreads = 10

    /// Mounts `options.backingDirectory` on `options.mountpoint` (libfuse3 lowlevel API,
    /// multithreaded loop). Without `foreground` it closes `context`'s state connection, forks
    /// a daemon before any thread or FUSE session exists and returns 0 once the mount is in place; with `foreground` it returns
    /// when the filesystem is unmounted (SIGTERM, SIGINT, SIGHUP or `mamfs unmount`). Another
    /// `mamfs mount` of the same mountpoint that is between its check and its mount makes this
    /// one wait for it (`MountpointLock`), and then refuses it as already mounted.
    /// - Returns: the process exit code (`.ok` once mounted, or when a foreground mount ended
    ///   cleanly; `.failure` when its FUSE session ended with an error).
    /// - Parameter events: told when a dead mount was removed (`force`), when the request was
    ///   checked, and when the mount answers (with the pid serving it).
    /// - Throws: `MAMError.fileNotFound` (missing backing directory or mountpoint),
    ///   `.invalidArguments` (mountpoint not an empty directory, backing not a directory,
    ///   mountpoint inside the backing directory, bad options), `.unknownAccount`,
    ///   `MountFailure` when the daemon could not mount, or (`.usage`) when a FUSE mount is
    ///   already on the mountpoint, or a dead one without `force`.
    public static func run(options: MountOptions, context: ProtectionContext, events: MountEvents = MountEvents()) throws -> ExitCode {
        var options = options
        // Held from the check that nothing is mounted until the mount answers: a second mount
        // of this mountpoint started meanwhile waits, then finds this one (`MountpointLock`).
        let lock = MountpointLock(options.mountpoint)
        defer { lock?.release() }
        let plan = try prepare(&options, context: context, events: events)
        events.prepared(options)
        if options.foreground {
            try redirectStderr(to: options.logFile)
            return try serve(options: options, plan: plan, context: context, installSignalHandlers: true) { _ in
                lock?.release()
                events.started(MountEvents.Started(pid: getpid(), backingDirectory: plan.rootPath, mountpoint: plan.mountpoint))
            }
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw MAMError.fromErrno("pipe") }
        // SQLite connections must not cross a fork: SQLite shares its lock state per file and
        // process, so the daemon's own connection would inherit this one's locks, which the
        // child does not hold. The CLI's next `mamfs policy set` then found no other reader,
        // deleted the WAL under the daemon, and the mount never saw the change. Close it here;
        // the daemon opens the state itself and the parent only waits for the mount.
        context.state.close()
        mamfs_flush_stdio()
        let pid = fork()
        if pid < 0 { throw MAMError.fromErrno("fork") }
        if pid == 0 {
            close(fds[0])
            let code = daemonMain(options: options, plan: plan, context: context, readyFD: fds[1])
            mamfs_flush_stdio()
            _exit(code.rawValue)
        }
        close(fds[1])
        let message = readToEnd(fds[0])
        close(fds[0])
        lock?.release()
        if message.first == UInt8(ascii: "0") {
            events.started(MountEvents.Started(pid: pid, backingDirectory: plan.rootPath, mountpoint: plan.mountpoint))
            return .ok
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard !message.isEmpty else {
            throw MountFailure(description: "the mount daemon exited before mounting", exitCode: .software)
        }
        let text = String(decoding: message.dropFirst(), as: UTF8.self)
        let parts = text.split(separator: "\t", maxSplits: 1)
        let code = parts.first.flatMap { Int32($0) }.flatMap(ExitCode.init(rawValue:)) ?? .software
        throw MountFailure(description: parts.count > 1 ? String(parts[1]) : text, exitCode: code)
    }

    /// Everything readable from `fd` until end of file (retrying EINTR; an error ends it too).
    static func readToEnd(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return bytes }
            bytes += chunk[0..<n]
        }
    }

    /// An absolute path for -o log=FILE (relative to the current directory: the daemon changes to /).
    static func logPath(_ path: String) throws -> String {
        var absolute = path
        if !path.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buffer, buffer.count) != nil else { throw MAMError.fromErrno("getcwd") }
            let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            absolute = (cwd == "/" ? "" : cwd) + "/" + path
        }
        return absolute
    }

    /// Makes `path` (appended to, created 0600) the process's stderr; nil keeps stderr as it is.
    static func redirectStderr(to path: String?) throws {
        guard let path else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw MAMError.fromErrno("log file \(path)") }
        mamfs_flush_stdio()
        dup2(fd, 2)
        close(fd)
    }

    // MARK: Daemon and session

    /// The daemon's work; reports to the parent through `readyFD` as `0` (mounted) or
    /// `1CODE<TAB>MESSAGE` (CODE the decimal `ExitCode`).
    private static func daemonMain(options: MountOptions, plan: Plan, context: ProtectionContext, readyFD inherited: Int32) -> ExitCode {
        setsid()
        chdir("/")
        let readyFD = closeInheritedDescriptors(keeping: inherited)
        let null = open("/dev/null", O_RDWR)
        if null >= 0 {
            dup2(null, 0)
            dup2(null, 1)
            if null > 2 { close(null) }
        }
        func report(_ text: String) {
            var bytes = Array(text.utf8)
            _ = bytes.withUnsafeMutableBytes { write(readyFD, $0.baseAddress, $0.count) }
        }
        do {
            try redirectStderr(to: options.logFile)
            // SQLite connections must not cross a fork: the daemon opens the state itself.
            let own = try ProtectionContext.open(stateDirectory: context.stateDirectory, passphraseFile: options.passphraseFile)
            // The parent's context came along with the fork: its keys go, so the only key
            // material here is `own`'s, which the session lock can withhold.
            context.discardKeys()
            return try serve(options: options, plan: plan, context: own, installSignalHandlers: true) { _ in
                report("0")
                close(readyFD)
                if options.logFile == nil { letGoOfStderrPipe() }
            }
        } catch let error as MAMError {
            report("1\(error.exitCode.rawValue)\t\(error)")
        } catch let error as MountFailure {
            report("1\(error.exitCode.rawValue)\t\(error.description)")
        } catch {
            report("1\(ExitCode.software.rawValue)\t\(error)")
        }
        close(readyFD)
        return .failure
    }

    /// Unblocks SIGHUP, SIGINT and SIGTERM, the signals that end the session. A signal mask
    /// survives fork and exec: a daemon started by a process that blocks them (a test
    /// harness's thread, a supervisor, a Python program that blocked them) never saw them, so
    /// `kill PID` and `systemctl stop` left the mount as it was. The worker threads libfuse
    /// starts afterwards inherit the mask.
    static func unblockStopSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGHUP, SIGINT, SIGTERM] { sigaddset(&set, signal) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Points stderr at /dev/null when it is a pipe. A daemon that kept its caller's pipe (as
    /// `out=$(mamfs mount ... 2>&1)` or `mamfs mount ... 2>&1 | tee` give it) would keep the
    /// reader waiting for end-of-file until the unmount. A terminal, a file or a socket (a
    /// journal) stays the daemon's log. Called once the mount answers: what goes wrong while
    /// mounting still reaches the caller.
    static func letGoOfStderrPipe() {
        var st = stat()
        guard fstat(2, &st) == 0, (st.st_mode & S_IFMT) == S_IFIFO else { return }
        let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
        guard null >= 0 else { return }
        mamfs_flush_stdio()
        dup2(null, 2)
        close(null)
    }

    /// Closes every descriptor above stderr except `ready`, which becomes 3 (returned). A daemon
    /// that kept what `mamfs mount` inherited would hold its caller's pipes and sockets open
    /// for as long as the mount lives: a caller waiting for end-of-file on them (a shell's
    /// `$(...)`, Foundation's Process) would wait forever. The parent's SQLite descriptors go
    /// too; the daemon opens the state itself.
    static func closeInheritedDescriptors(keeping ready: Int32) -> Int32 {
        var ready = ready
        if ready != 3 {
            guard dup2(ready, 3) == 3 else { return ready }
            ready = 3
        }
        if (try? SystemCall.closeRange(4, UInt32.max)) == nil {
            let limit = min(Int(sysconf(Int32(_SC_OPEN_MAX))), 65536)
            if limit > 4 { for fd in 4..<Int32(limit) { close(fd) } }
        }
        return ready
    }

    /// Raises the soft open-file limit to the hard one. The daemon keeps one O_PATH descriptor
    /// per node the kernel knows (as passthrough_hp does), so a tree of a few thousand files
    /// would otherwise run into EMFILE under the usual soft limit of 1024.
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(SystemConstants.resourceOpenFiles, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(SystemConstants.resourceOpenFiles, &limit)
    }

    /// Grows the descriptor table once, at start, to `descriptorSlots(softLimit:)` slots. The
    /// kernel doubles a process's table when an open needs a slot past its end, and in a process
    /// with threads each growth waits for an RCU grace period (`expand_fdtable` ->
    /// `synchronize_rcu`, milliseconds on a VM) inside that open: the first `tar x` of 5,000
    /// files into a fresh mount waited in five of its CREATEs. A table never shrinks; a slot
    /// costs the kernel 8 bytes.
    static func reserveDescriptorTable() {
        var limit = rlimit()
        guard getrlimit(SystemConstants.resourceOpenFiles, &limit) == 0 else { return }
        let highest = descriptorSlots(softLimit: UInt64(limit.rlim_cur)) - 1
        let probe = open("/", SystemConstants.pathOnly | O_CLOEXEC)
        guard probe >= 0, highest > probe else { if probe >= 0 { close(probe) }; return }
        if dup2(probe, Int32(highest)) >= 0 { close(Int32(highest)) }
        close(probe)
    }

    /// The descriptor slots the daemon reserves under a soft open-file limit of `softLimit`: the
    /// node descriptors the cache may keep (`DescriptorCache.budget(softLimit:)`) and 1,024 more
    /// for open handles, listings, the state database and libfuse, within the limit.
    static func descriptorSlots(softLimit: UInt64) -> Int {
        Int(min(UInt64(DescriptorCache.budget(softLimit: softLimit) + 1024), min(softLimit, UInt64(Int32.max))))
    }

    /// Creates the session, mounts, calls `ready` and runs the multithreaded loop until unmounted.
    static func serve(options: MountOptions, plan: Plan, context: ProtectionContext, installSignalHandlers: Bool,
                      ready: (OpaquePointer) -> Void) throws -> ExitCode {
        umask(0)  // the kernel already applied the caller's umask to every mode we get
        raiseOpenFileLimit()
        reserveDescriptorTable()
        MallocArenas.limitToCPUs()
        // Keys are unwrapped for this backing directory (the compliance gate's device check);
        // refusals of a busy mount may be counted into bursts.
        context.complianceSite = plan.rootPath
        context.flushesGateRefusalRecords = false
        let fs = try OverlayFilesystem(context: context, options: options, rootPath: plan.rootPath)
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("mamfs"), strdup("-o"), strdup(plan.fuseOptions.joined(separator: ","))]
        argv.append(nil)
        defer { argv.forEach { free($0) } }
        return try argv.withUnsafeMutableBufferPointer { buffer -> ExitCode in
            var args = fuse_args(argc: 3, argv: buffer.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            let connectionOptions = fuse_parse_conn_info_opts(&args)
            defer { free(UnsafeMutableRawPointer(connectionOptions)) }
            fs.connectionOptions = connectionOptions
            var ops = LowLevelOperations.make()
            let userdata = Unmanaged.passRetained(fs)
            defer { userdata.release() }
            guard let session = fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, userdata.toOpaque()) else {
                throw MAMError.invalidArguments("libfuse refused the mount options: \(plan.fuseOptions.joined(separator: ","))")
            }
            defer { fuse_session_destroy(session) }
            if installSignalHandlers {
                guard fuse_set_signal_handlers(session) == 0 else { throw MAMError.internalError("cannot install signal handlers") }
                unblockStopSignals()
            }
            defer { if installSignalHandlers { fuse_remove_signal_handlers(session) } }
            guard fuse_session_mount(session, plan.mountpoint) == 0 else {
                throw MountFailure(description: "cannot mount on \(plan.mountpoint) (see the message above; is /dev/fuse usable?)", exitCode: .cantCreate)
            }
            defer { fuse_session_unmount(session) }
            // The transport that asks the kernel for FUSE_DIRECT_IO_ALLOW_MMAP (Sources/CFuseTransport), so
            // a read-only handle, opened with direct I/O, can be mapped MAP_SHARED; it also polls
            // /dev/fuse before blocking when `-o busy_poll` asks for it.
            let transport = mamfs_fuse_use_transport(session, options.busyPoll)
            guard transport == 0 else {
                throw MAMError.internalError("cannot set the FUSE session's transport: \(String(cString: strerror(-transport)))")
            }
            if options.verbose {
                let owner = options.account.isEmpty ? "unmanaged" : options.account
                fs.log("mounted \(plan.rootPath) on \(plan.mountpoint) (pid \(getpid()); new files outside protected directories: \(owner))")
            }
            let sessionAddress = UInt(bitPattern: session)
            fs.attributesChanged = { nodeid in
                _ = fuse_lowlevel_notify_inval_inode(OpaquePointer(bitPattern: sessionAddress), nodeid, -1, 0)
            }
            fs.contentInvalidated = { nodeid in
                _ = fuse_lowlevel_notify_inval_inode(OpaquePointer(bitPattern: sessionAddress), nodeid, 0, 0)
            }
            // Stopped before the session goes (the defers above run after this one).
            let entryInvalidator = EntryInvalidator(session: session)
            defer { entryInvalidator.stop() }
            fs.nameReplaced = { parent, name in entryInvalidator.invalidate(parent: parent, name: name) }
            fs.nameInvalidationsSettle = { seconds in entryInvalidator.settle(within: seconds) }
            // Before `ready`: the mount owns its bus name by the time `mamfs mount` returns.
            let publisher = startPublishing(fs: fs, options: options, context: context)
            defer { stopPublishing(publisher, context: context) }
            // Before `ready` too: untilFirstUserAuth keys are withheld before any request.
            let lockListeners = startSessionLock(fs: fs, options: options, mountpoint: plan.mountpoint,
                                                 serving: { fuse_session_exited(OpaquePointer(bitPattern: sessionAddress)) == 0 })
            defer { lockListeners.stop() }
            ready(session)
            fs.start()
            defer { fs.stop() }
            let config = fuse_loop_cfg_create()
            defer { fuse_loop_cfg_destroy(config) }
            // Workers are never destroyed: no idle limit is set (libfuse 3.12+ defaults to none;
            // setting one made libfuse end and re-create a thread around every burst of requests,
            // and each new thread malloced a fresh max_write-sized receive buffer in its own
            // arena; the freed buffers fragmented the heap: RSS grew 3-7 MiB per write/read/rm
            // cycle, docs/PERFORMANCE.md). The pool is capped instead: at most `workerThreads`
            // buffers. DaemonRobustnessTests.workerThreadsPersistWithinTheCap holds this.
            fuse_loop_cfg_set_max_threads(config, UInt32(MountDaemon.workerThreads))
            let rc = fuse_session_loop_mt(session, config)
            if options.verbose { fs.log("unmounted \(plan.mountpoint); the daemon exits") }
            return rc < 0 ? .failure : .ok
        }
    }
}
