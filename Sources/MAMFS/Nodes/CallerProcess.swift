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
}

/// One process (or thread: the kernel's FUSE requests carry the thread id, and /proc/TID
/// answers for it) as the kernel knows it: the id and the start time, in clock ticks after
/// boot (field 22 of /proc/PID/stat). A pid reused by a later process has another start time.
struct ProcessKey: Hashable, Sendable {
    let pid: pid_t
    let startTime: UInt64
}

/// The executable a caller runs: its resolved path (/proc/PID/exe without the kernel's
/// " (deleted)" suffix), the file it is, and its SHA-256 computed on first request only
/// (a `managedApps` rule with a digest), shared by every process running the same file.
final class CallerExecutable: Sendable {
    /// The absolute executable path ("" when the process's executable could not be read).
    let path: String
    /// nil when the executable could not be stat'ed (the process exited, a kernel thread).
    let file: ExecutableFileID?
    /// The process it was read from (to open the executable for the digest).
    let process: ProcessKey?
    private let digests: ExecutableDigests

    init(path: String, file: ExecutableFileID?, process: ProcessKey?, digests: ExecutableDigests) {
        self.path = path
        self.file = file
        self.process = process
        self.digests = digests
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
                // Hashed through the descriptor checked: the file, not whatever the name holds next.
                guard let opened = try? FileDescriptor.open(candidate, O_RDONLY | O_CLOEXEC),
                      let st = try? opened.stat(), ExecutableFileID(st) == file,
                      let digest = try? SHA256.hex(ofFileAt: ProcessDescriptorPath.path(of: opened.rawValue)) else { continue }
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
/// (pid, start time), so a pid the kernel hands to a new process never inherits the old
/// one's executable (nor a decision made for it).
///
/// A lookup opens and reads /proc/PID/stat once (the start time: with the pid it names one
/// process). A process not seen before also costs a readlink and a stat of /proc/PID/exe, all
/// through one descriptor of /proc/PID, which keeps naming the process it was opened for: a
/// pid reused meanwhile makes the reads fail instead of mixing two processes. At most `capacity` processes are kept; the least
/// recently used go first.
final class CallerProcesses: Sendable {
    private struct Entry {
        let executable: CallerExecutable
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

    init(capacity: Int = 1024, digests: ExecutableDigests = ExecutableDigests(), procRoot: String = "/proc") {
        self.capacity = max(1, capacity)
        self.digests = digests
        self.procRoot = procRoot
    }

    /// Processes remembered now.
    var count: Int { table.withLock { $0.entries.count } }

    /// The executable of `pid` (a thread id works too). A process that is gone, or whose
    /// /proc entries cannot be read, gets an executable with an empty path (never managed).
    func executable(of pid: pid_t) -> CallerExecutable {
        let unknown = CallerExecutable(path: "", file: nil, process: nil, digests: digests)
        guard pid > 0 else { return unknown }
        // A process seen before: (pid, start time) names it, so its stat file alone answers
        // (one open and one read per request).
        if let file = try? FileDescriptor.open(procRoot + "/\(pid)/stat", O_RDONLY | O_CLOEXEC),
           let startTime = CallerProcesses.startTime(statFile: file.rawValue),
           let known = remembered(ProcessKey(pid: pid, startTime: startTime)) {
            return known
        }
        // Not seen before: every read through one descriptor of /proc/PID, so a pid reused
        // meanwhile makes them fail instead of mixing two processes.
        guard let directory = try? FileDescriptor.open(procRoot + "/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
              let startTime = CallerProcesses.startTime(procDirectory: directory.rawValue) else {
            return unknown
        }
        let key = ProcessKey(pid: pid, startTime: startTime)
        if let known = remembered(key) { return known }
        let executable = read(key, procDirectory: directory.rawValue)
        remember(executable, for: key)
        return executable
    }

    /// The executable path and file of the process open as `procDirectory`.
    private func read(_ key: ProcessKey, procDirectory: Int32) -> CallerExecutable {
        var path = (try? SymbolicLink.readLinkString(atFD: procDirectory, name: "exe")) ?? ""
        if path.hasSuffix(ProcessDescriptorPath.deletedSuffix) {
            path = String(path.dropLast(ProcessDescriptorPath.deletedSuffix.count))
        }
        var st = stat()
        let file = fstatat(procDirectory, "exe", &st, 0) == 0 ? ExecutableFileID(st) : nil
        return CallerExecutable(path: path, file: file, process: key, digests: digests)
    }

    /// The executable remembered for `key` (marked as just used), or nil.
    private func remembered(_ key: ProcessKey) -> CallerExecutable? {
        table.withLock { table -> CallerExecutable? in
            guard table.entries[key] != nil else { return nil }
            table.clock += 1
            table.entries[key]!.lastUse = table.clock
            return table.entries[key]!.executable
        }
    }

    private func remember(_ executable: CallerExecutable, for key: ProcessKey) {
        table.withLock { table in
            if table.entries.count >= capacity {
                // Evict the least recently used quarter at once (one sort per capacity/4 misses).
                let evict = max(1, capacity / 4)
                let oldest = table.entries.sorted { $0.value.lastUse < $1.value.lastUse }.prefix(evict).map(\.key)
                for old in oldest { table.entries[old] = nil }
            }
            table.clock += 1
            table.entries[key] = Entry(executable: executable, lastUse: table.clock)
        }
    }

    /// Field 22 (starttime) of the `stat` file in the /proc/PID directory `procDirectory`.
    static func startTime(procDirectory: Int32) -> UInt64? {
        guard let file = try? FileDescriptor.open(in: procDirectory, "stat", O_RDONLY | O_CLOEXEC) else { return nil }
        return startTime(statFile: file.rawValue)
    }

    /// The start time from an open /proc/PID/stat. procfs makes the whole line at the first
    /// read, so a read that does not fill the buffer has it all (one read per request).
    static func startTime(statFile fd: Int32) -> UInt64? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            guard n >= 0 else { return nil }
            bytes += buffer[0..<n]
            if n < buffer.count { break }
            if bytes.count > 1 << 16 { return nil }
        }
        return startTime(statLine: bytes)
    }

    /// Field 22 of a /proc/PID/stat line. The command name (field 2) is in parentheses and
    /// may itself hold ")", spaces or digits: the fields are counted after the last ")".
    static func startTime(statLine bytes: [UInt8]) -> UInt64? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After ")": field 3 (state) is the first; field 22 is the 20th.
        let fields = bytes[(close + 1)...].split { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") }
        guard fields.count >= 20 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }
}
