import Glibc
import MAMProtection
import MAMSystem
import Synchronization

/// Which executable file a process runs: the (device, inode, size, mtime) of what its
/// `/proc/PID/exe` names. A rebuilt or replaced binary at the same path is another file.
struct ExecutableFileID: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    /// Bytes.
    let size: Int64
    let modifiedSeconds: Int
    let modifiedNanoseconds: Int

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modifiedSeconds = st.st_mtim.tv_sec
        modifiedNanoseconds = st.st_mtim.tv_nsec
    }

    init(_ identity: FileIdentity) {
        device = identity.device
        inode = identity.inode
        size = identity.size
        modifiedSeconds = identity.modifiedSeconds
        modifiedNanoseconds = identity.modifiedNanoseconds
    }
}

/// A process (or thread: the kernel's FUSE requests carry the thread id, and /proc/TID
/// answers for it) running one executable file, reached through one mount. The same pid
/// running another file (after execve, or reused by a later process) is another key.
struct ProcessKey: Hashable, Sendable {
    let pid: pid_t
    let file: ExecutableFileID
    let mountID: UInt64
}

/// The executable a caller runs: its resolved path (/proc/PID/exe without the kernel's
/// " (deleted)" suffix), the file it is, and its SHA-256 computed on first request only
/// (a `managedApps` rule with a digest), shared by every process running the same file.
final class CallerExecutable: Sendable {
    /// The absolute executable path the rules match ("" when the process's executable could
    /// not be read, or its path cannot be trusted: `CallerProcesses.distrust`).
    let path: String
    /// The path for the audit log and the desktop: `path`, or for an untrusted one what the
    /// process's /proc/PID/exe says with why it is not trusted.
    let shownPath: String
    /// nil when the executable could not be stat'ed (the process exited, a kernel thread).
    let file: ExecutableFileID?
    /// The process it was read from (to open the executable for the digest).
    let process: ProcessKey?
    private let digests: ExecutableDigests
    /// Decisions made for this executable, for one state generation.
    private let decisions = Mutex(DecisionMemo())

    init(path: String, shownPath: String? = nil, file: ExecutableFileID?, process: ProcessKey?, digests: ExecutableDigests) {
        self.path = path
        self.shownPath = shownPath ?? path
        self.file = file
        self.process = process
        self.digests = digests
    }

    /// What a request asks, less the executable (the memo's owner) and the app account (the
    /// mount's, the same for every request).
    struct DecisionKey: Equatable {
        let action: AccessAction
        let owner: String?
        let location: StorageLocation
    }

    /// A few decisions, looked up by equality (most executables ask a handful of questions:
    /// a hash of the owner would cost more than comparing it).
    private struct DecisionMemo {
        var generation: UInt64 = 0
        var entries: [(key: DecisionKey, decision: AccessDecision)] = []
        var next = 0
    }

    /// At most this many decisions are kept per executable (the oldest replaced first).
    static let decisionCapacity = 16

    /// The decision for `key` made under state `generation`, else `decide()`'s, kept for the
    /// generation. A decision is a function of the request and the policies (`AccessRules`),
    /// and every policy change bumps the generation, so a kept one is never stale.
    func decision(_ key: DecisionKey, generation: UInt64, decide: () -> AccessDecision) -> AccessDecision {
        let known = decisions.withLock { memo -> AccessDecision? in
            guard memo.generation == generation else { return nil }
            return memo.entries.first { $0.key == key }?.decision
        }
        if let known { return known }
        let decision = decide()
        decisions.withLock { memo in
            guard generation >= memo.generation else { return }
            if generation > memo.generation { memo = DecisionMemo(generation: generation) }
            if memo.entries.count < CallerExecutable.decisionCapacity {
                memo.entries.append((key, decision))
            } else {
                memo.entries[memo.next] = (key, decision)
                memo.next = (memo.next + 1) % CallerExecutable.decisionCapacity
            }
        }
        return decision
    }

    /// The executable's SHA-256 as 64 lowercase hex digits, nil when it cannot be read (or no
    /// longer is the file this identity names). Computed once per file (`ExecutableDigests`).
    func sha256() -> String? {
        guard let file else { return nil }
        return digests.digest(of: file) { [path, process] in
            // The running image first (also when its name was removed or replaced), then the path.
            var candidates: [String] = []
            if let process { candidates.append("/proc/\(process.pid)/exe") }
            if !path.isEmpty { candidates.append(path) }
            for candidate in candidates {
                // Opened without waiting (a FIFO or a device put at the path would otherwise
                // hold the worker in open(2)), and hashed through the descriptor checked: a
                // regular file that is the executable, not whatever the name holds next.
                guard let opened = try? FileDescriptor.open(candidate, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY),
                      let st = try? opened.stat(), (st.st_mode & S_IFMT) == S_IFREG, ExecutableFileID(st) == file,
                      let digest = try? SHA256.hex(ofDescriptor: opened.rawValue) else { continue }
                return digest
            }
            return nil
        }
    }
}

/// SHA-256 digests of executable files by (device, inode, size, mtime), at most `capacity`
/// (emptied when full: a digest is only recomputed, never wrong).
final class ExecutableDigests: Sendable {
    private let digests = Mutex<[ExecutableFileID: String]>([:])
    let capacity: Int

    init(capacity: Int = 256) { self.capacity = capacity }

    /// The cached digest of `file`, else `compute()` (not cached when it fails).
    func digest(of file: ExecutableFileID, compute: () -> String?) -> String? {
        if let known = digests.withLock({ $0[file] }) { return known }
        guard let digest = compute() else { return nil }
        digests.withLock { table in
            if table.count >= capacity { table.removeAll(keepingCapacity: true) }
            table[file] = digest
        }
        return digest
    }
}

/// The executables of the processes that send requests, read from /proc and kept per
/// (pid, executable file), so neither a process that execs another program nor a pid the
/// kernel hands to a new process ever inherits the old executable (nor a decision made for it).
///
/// A lookup is one statx(2) of /proc/PID/exe (the file the process runs now). A key not seen
/// before also costs a readlink of it, between two statx calls through one descriptor of
/// /proc/PID (which keeps naming the process it was opened for): a process that changed its
/// executable in between is read again. A file with several hard links (so several paths, as
/// busybox's applets) has its path read on every lookup. At most `capacity` processes are
/// kept; the least recently used go first.
final class CallerProcesses: Sendable {
    private struct Entry {
        let executable: CallerExecutable
        /// The file's link count when it was read (> 1: the path is checked on each lookup).
        let links: UInt32
        var lastUse: UInt64
    }
    private struct Table {
        var entries: [ProcessKey: Entry] = [:]
        var clock: UInt64 = 0
    }
    private let table = Mutex(Table())
    let capacity: Int
    /// The digests the executables share.
    let digests: ExecutableDigests
    /// Where the per-process directories are (tests may point elsewhere).
    let procRoot: String
    /// `procRoot`, open (-1 when it could not be opened: every lookup is then unknown).
    private let procFD: Int32
    /// The daemon's own user namespace (device, inode of `procRoot/self/ns/user`); nil when it
    /// cannot be read (a /proc-like test directory), and then no caller's is compared.
    private let userNamespace: (UInt64, UInt64)?
    /// The daemon's own mount namespace (`procRoot/self/ns/mnt`), likewise.
    private let mountNamespace: (UInt64, UInt64)?

    init(capacity: Int = 1024, digests: ExecutableDigests = ExecutableDigests(), procRoot: String = "/proc") {
        self.capacity = max(1, capacity)
        self.digests = digests
        self.procRoot = procRoot
        procFD = (try? FileDescriptor.open(procRoot, O_RDONLY | O_DIRECTORY | O_CLOEXEC).take()) ?? -1
        var st = stat()
        userNamespace = procFD >= 0 && fstatat(procFD, "self/ns/user", &st, 0) == 0 ? (UInt64(st.st_dev), UInt64(st.st_ino)) : nil
        mountNamespace = procFD >= 0 && fstatat(procFD, "self/ns/mnt", &st, 0) == 0 ? (UInt64(st.st_dev), UInt64(st.st_ino)) : nil
    }

    deinit {
        if procFD >= 0 { _ = Glibc.close(procFD) }
    }

    /// Processes remembered now.
    var count: Int { table.withLock { $0.entries.count } }

    /// The executable of `pid` (a thread id works too). A process that is gone, or whose
    /// /proc entries cannot be read, gets an executable with an empty path (never managed);
    /// one whose executable file cannot be stat'ed gets its path and no file (not cached).
    func executable(of pid: pid_t) -> CallerExecutable {
        let unknown = CallerExecutable(path: "", file: nil, process: nil, digests: digests)
        guard pid > 0, procFD >= 0 else { return unknown }
        guard let identity = try? FileIdentity.of("\(pid)/exe", in: procFD) else {
            let path = (try? SymbolicLink.readLinkString(atFD: procFD, name: "\(pid)/exe")).map(CallerProcesses.withoutDeletedSuffix) ?? ""
            return CallerExecutable(path: path, file: nil, process: nil, digests: digests)
        }
        let key = ProcessKey(pid: pid, file: ExecutableFileID(identity), mountID: identity.mountID)
        if let (known, links) = remembered(key) {
            if links <= 1 { return known }
            // Several paths lead to this file: the one the process runs it by decides.
            if let path = try? SymbolicLink.readLinkString(atFD: procFD, name: "\(pid)/exe"),
               CallerProcesses.withoutDeletedSuffix(path) == known.path {
                return known
            }
        }
        guard let directory = try? FileDescriptor.open(in: procFD, "\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC) else {
            return unknown
        }
        // The path between two identities that agree: the same executable throughout.
        for _ in 0..<3 {
            guard let before = try? FileIdentity.of("exe", in: directory.rawValue) else { return unknown }
            let link = (try? SymbolicLink.readLinkString(atFD: directory.rawValue, name: "exe")) ?? ""
            let path = CallerProcesses.withoutDeletedSuffix(link)
            guard let after = try? FileIdentity.of("exe", in: directory.rawValue) else { return unknown }
            guard before == after else { continue }
            let key = ProcessKey(pid: pid, file: ExecutableFileID(after), mountID: after.mountID)
            let distrust = distrust(path, deleted: link != path, of: after, process: directory.rawValue)
            let executable = CallerExecutable(path: distrust == nil ? path : "", shownPath: distrust.map { "\(path) (\($0))" },
                                              file: key.file, process: key, digests: digests)
            remember(executable, links: after.links, for: key)
            return executable
        }
        return unknown
    }

    /// Why the executable path a process's /proc/PID/exe gives cannot be trusted, nil when it
    /// can. The kernel gives the path as the process sees it, and a process in a user
    /// namespace of its own may mount anything over any directory there, and may even point
    /// its exe link at another file (prctl PR_SET_MM_MAP): so a caller outside the daemon's
    /// user namespace (a container, `unshare -U`, a bubblewrap sandbox) is never a managed
    /// app, and a path that names another file in the daemon's view (a mount namespace of its
    /// own) is not the process's. A removed executable (" (deleted)", an upgraded program
    /// still running) has no file at its path to compare: it is trusted only in the daemon's
    /// own mount namespace.
    private func distrust(_ path: String, deleted: Bool, of file: FileIdentity, process directory: Int32) -> String? {
        func sameNamespace(_ kind: String, _ own: (UInt64, UInt64)?) -> Bool? {
            guard let own else { return true }
            var st = stat()
            guard fstatat(directory, "ns/" + kind, &st, 0) == 0 else { return nil }
            return (UInt64(st.st_dev), UInt64(st.st_ino)) == own
        }
        switch sameNamespace("user", userNamespace) {
        case nil: return "its user namespace cannot be read"
        case false?: return "in another user namespace"
        case true?: break
        }
        if deleted {
            return sameNamespace("mnt", mountNamespace) == true ? nil : "removed, in another mount namespace"
        }
        var st = stat()
        guard !path.isEmpty, stat(path, &st) == 0, UInt64(st.st_dev) == file.device, UInt64(st.st_ino) == file.inode else {
            return "not the file at that path here"
        }
        return nil
    }

    /// `path` without the kernel's " (deleted)" suffix of a removed executable.
    static func withoutDeletedSuffix(_ path: String) -> String {
        path.hasSuffix(ProcessDescriptorPath.deletedSuffix) ? String(path.dropLast(ProcessDescriptorPath.deletedSuffix.count)) : path
    }

    /// The executable remembered for `key` and its link count (marked as just used), or nil.
    private func remembered(_ key: ProcessKey) -> (CallerExecutable, UInt32)? {
        table.withLock { table -> (CallerExecutable, UInt32)? in
            guard let entry = table.entries[key] else { return nil }
            table.clock += 1
            table.entries[key]!.lastUse = table.clock
            return (entry.executable, entry.links)
        }
    }

    private func remember(_ executable: CallerExecutable, links: UInt32, for key: ProcessKey) {
        table.withLock { table in
            if table.entries[key] == nil, table.entries.count >= capacity {
                // Evict the least recently used quarter at once (one sort per capacity/4 misses).
                let evict = max(1, capacity / 4)
                let oldest = table.entries.sorted { $0.value.lastUse < $1.value.lastUse }.prefix(evict).map(\.key)
                for old in oldest { table.entries[old] = nil }
            }
            table.clock += 1
            table.entries[key] = Entry(executable: executable, links: links, lastUse: table.clock)
        }
    }
}
