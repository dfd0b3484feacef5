import CFuseTransport
import Glibc
import MAMFileProvider
import MAMProtection

/// Validation before a mount: what `mamfs mount` checks and resolves before it forks the daemon.
extension MountDaemon {
    /// What the daemon mounts: resolved paths and the FUSE options it passes to libfuse.
    struct Plan: Sendable {
        let rootPath: String
        let mountpoint: String
        let fuseOptions: [String]
    }

    /// Checks `options` and resolves them in place (paths made absolute and symlink-free, the
    /// account named by its accountId, mamfs's own `-o` words applied) and records the backing
    /// directory as a known root of the account (the wipe's list).
    /// - Throws: `MAMError.fileNotFound` (a missing directory), `.invalidArguments` (not a
    ///   directory, a mountpoint not empty or inside the backing directory, a bad `-o`, an
    ///   overlapping remote), `.unknownAccount`, `.keyUnavailable` (a wiped account).
    static func prepare(_ options: inout MountOptions, context: ProtectionContext, events: MountEvents = MountEvents()) throws -> Plan {
        let (root, mountpoint) = try checkedDirectories(options, events: events)
        // Resolved once: the locations of files are found from their path in the mount.
        options.mountpoint = mountpoint
        var fuse = try applyMountOptions(&options)
        if options.provider != nil { options.remote = try checkedRemote(options.remote, root: root, mountpoint: mountpoint, access: options.remoteAccess) }
        options.account = try mountAccount(options.account, context: context)
        // The compliance gate: a mount for an account whose policy has checks starts only while
        // its key may be unwrapped (for this backing directory).
        if !options.account.isEmpty, context.policyEvaluator.policy(forAccountId: options.account)?.compliance != nil {
            context.complianceSite = root
            try context.requireAccountKey(accountId: options.account)
        }
        // Selective wipe removes the account's files under every backing directory it knows.
        try context.state.addKnownRoot(root, kind: .backing, accountId: options.account.isEmpty ? nil : options.account)
        // The kernel checks permissions itself (default_permissions) when other users can reach
        // the mount (allow_other, allow_root): the daemon then acts for callers with other
        // credentials. Without those options only the mounting user's processes get in, and the
        // daemon runs with that user's credentials, so the backing filesystem makes the same
        // checks; leaving default_permissions out then saves a GETATTR of the directory on every
        // create and unlink (the kernel drops a directory's attributes whenever it changes).
        // access(2) and chdir are answered by `OverlayFilesystem.access`.
        let othersCanEnter = fuse.contains("allow_other") || fuse.contains("allow_root")
        if othersCanEnter && !fuse.contains("default_permissions") { fuse.append("default_permissions") }
        fuse.append(MountTable.fsnameOption(backingDirectory: root))
        fuse.append(MountTable.subtypeOption)
        return Plan(rootPath: root, mountpoint: mountpoint, fuseOptions: fuse)
    }

    /// The backing directory and the mountpoint, resolved: both directories, nothing FUSE
    /// mounted on the mountpoint (a dead mount is removed with `force`), the mountpoint empty
    /// and not inside the backing directory.
    private static func checkedDirectories(_ options: MountOptions, events: MountEvents) throws -> (root: String, mountpoint: String) {
        let root = try resolvedPath(options.backingDirectory, "backing directory")
        guard isDirectory(root) else { throw MAMError.invalidArguments("backing \(options.backingDirectory) is not a directory") }
        try checkNothingMounted(on: options.mountpoint, force: options.force, events: events)
        let mountpoint = try resolvedPath(options.mountpoint, "mountpoint")
        guard isDirectory(mountpoint) else { throw MAMError.invalidArguments("mountpoint \(options.mountpoint) is not a directory") }
        guard let dir = opendir(mountpoint) else { throw MAMError.fromErrno("mountpoint \(options.mountpoint)") }
        var empty = true
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { empty = false; break }
        }
        closedir(dir)
        guard empty else { throw MAMError.invalidArguments("mountpoint \(options.mountpoint) is not empty") }
        if isInside(mountpoint, root) {
            throw MAMError.invalidArguments("mountpoint \(options.mountpoint) is inside the backing directory \(options.backingDirectory)")
        }
        return (root, mountpoint)
    }

    /// Refuses a mountpoint with a FUSE mount on top: a second daemon would be stacked over
    /// the first, and a dead mount answers ENOTCONN to everything. With `force`, a dead mount
    /// is removed (and `events.removedDeadMount` told) instead.
    /// - Throws: `MountFailure` (`.usage`) naming what is there and how to clear it;
    ///   (`.cantCreate`) when a dead mount cannot be removed.
    private static func checkNothingMounted(on given: String, force: Bool, events: MountEvents) throws {
        let (path, state) = MountpointState.find(given)
        switch state {
        case .notMounted:
            return
        case .live(let entry, _):
            throw MountFailure(description: "\(given): already mounted (\(MountpointState.describe(entry)) is there); unmount it first with 'mamfs unmount \(given)'",
                               exitCode: .usage)
        case .dead(let entry):
            guard force else {
                let daemon = entry.filesystemType == MountTable.filesystemType
                    ? "the mamfs daemon that served \(entry.source) exited" : "the daemon of \(MountpointState.describe(entry)) exited"
                throw MountFailure(description: "\(given): a dead mount is there (\(daemon)); remove it with 'mamfs unmount \(given)', or mount with --force",
                                   exitCode: .usage)
            }
            try removeDeadMount(path)
            events.removedDeadMount(path)
        }
    }

    /// Applies mamfs's own `-o` words to `options` and returns the rest, for libfuse.
    private static func applyMountOptions(_ options: inout MountOptions) throws -> [String] {
        var fuse: [String] = []
        for option in options.fuseOptions.flatMap({ $0.split(separator: ",").map(String.init) }) where !option.isEmpty {
            // Keeps empty parts: "=" or "log=" must be refused, not crash or vanish.
            let parts = option.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            switch parts[0] {
            case "attr_timeout", "entry_timeout":
                guard parts.count == 2, let seconds = Double(parts[1]), seconds >= 0 else {
                    throw MAMError.invalidArguments("-o \(option): expected a number of seconds")
                }
                if parts[0] == "attr_timeout" { options.attributeTimeout = seconds } else { options.entryTimeout = seconds }
            case "retry_base":
                guard parts.count == 2, let seconds = Double(parts[1]), seconds > 0, seconds.isFinite else {
                    throw MAMError.invalidArguments("-o \(option): expected a positive number of seconds")
                }
                options.retryBase = seconds
            case "busy_poll":
                guard parts.count == 2, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
                      let micros = UInt32(parts[1]), micros <= mamfs_BUSY_POLL_MAX_US else {
                    throw MAMError.invalidArguments("-o \(option): expected microseconds from 0 to \(mamfs_BUSY_POLL_MAX_US)")
                }
                options.busyPoll = micros
            case "log":
                guard parts.count == 2, !parts[1].isEmpty else { throw MAMError.invalidArguments("-o log=FILE: expected a file") }
                options.logFile = try logPath(parts[1])
            case "page_cache":
                guard parts.count == 1 else { throw MAMError.invalidArguments("-o \(option): takes no value") }
                options.pageCache = true
            case "notify":
                guard parts.count == 1 else { throw MAMError.invalidArguments("-o \(option): takes no value") }
                options.notify = true
            case "writeback_cache":
                throw MAMError.invalidArguments("-o writeback_cache is not supported (mamfs must see every write)")
            case "defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail", "rw", "account", "state", "comment":
                // fstab and mount(8) words that are not FUSE options.
                continue
            case "":
                throw MAMError.invalidArguments("-o \(option): an option needs a name")
            default:
                if parts[0].hasPrefix("x-") { continue }
                fuse.append(option)
            }
        }
        return fuse
    }

    /// The remote directory of a provider mount, resolved; it must not overlap the backing
    /// directory or the mountpoint. A WebDAV URL is kept as given once its store can be made
    /// (URL, credentials file and CA file checked here, before the daemon starts; no request
    /// is sent).
    private static func checkedRemote(_ remote: String?, root: String, mountpoint: String, access: RemoteAccess) throws -> String {
        guard let remote, !remote.isEmpty else { throw MAMError.invalidArguments("--provider needs --remote DIR") }
        if WebDAVRemote.isURL(remote) {
            _ = try access.store(for: remote)
            return remote
        }
        let remoteRoot = try resolvedPath(remote, "remote directory")
        guard isDirectory(remoteRoot) else { throw MAMError.invalidArguments("remote \(remote) is not a directory") }
        if isInside(remoteRoot, root) || isInside(root, remoteRoot) || isInside(remoteRoot, mountpoint) {
            throw MAMError.invalidArguments("the remote \(remote) must not overlap the backing directory or the mountpoint")
        }
        return remoteRoot
    }

    /// The accountId new files get ("" for none).
    private static func mountAccount(_ account: String, context: ProtectionContext) throws -> String {
        guard !AccountIdentity.canonical(account).isEmpty else { return "" }
        let accountId = try context.resolveAccount(account).accountId
        if context.isWiped(owner: accountId) {
            throw MAMError.keyUnavailable("account \(accountId) was wiped; enroll it again before mounting for it")
        }
        return accountId
    }

    private static func resolvedPath(_ path: String, _ what: String) throws -> String {
        guard let resolved = realpath(path, nil) else {
            if errno == ENOENT { throw MAMError.fileNotFound("\(what) \(path) does not exist") }
            throw MAMError.fromErrno("\(what) \(path)")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// True when the absolute path `a` is `b` or below it.
    private static func isInside(_ a: String, _ b: String) -> Bool {
        a == b || a.hasPrefix(b == "/" ? "/" : b + "/")
    }
}
