import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Synchronization
import Testing
@testable import MAMFS

/// The caller's executable, read from /proc and cached per (pid, executable file).
@Suite("Caller process identity")
struct CallerProcessTests {
    /// A started `executable` (not waited for): its pid, killed and reaped by `stop`.
    static func spawn(_ executable: String, _ arguments: [String]) throws -> pid_t {
        var pid: pid_t = 0
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let rc = posix_spawn(&pid, executable, nil, nil, argv, environ)
        guard rc == 0 else { throw TestSupportError("posix_spawn \(executable): \(rc)") }
        return pid
    }

    static func stop(_ pid: pid_t) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    /// The resolved path and SHA-256 of `path` by the system's own tools.
    static func systemDigest(_ path: String) throws -> String {
        let result = try shell("sha256sum \(shellQuote(path))")
        return String(result.out.prefix(64))
    }

    /// The kernel's id of the calling thread (from /proc/thread-self -> "PID/task/TID").
    static func currentThreadId() -> pid_t {
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return pid_t(target.split(separator: "/").last.map(String.init) ?? "") ?? 0
    }

    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    @Test("the test process's own pid: its executable path, file and SHA-256")
    func ownProcess() throws {
        let processes = CallerProcesses()
        let own = processes.executable(of: getpid())
        let expected = CallerProcessTests.realPath("/proc/self/exe")
        #expect(own.path == expected)
        var st = stat()
        #expect(stat(expected, &st) == 0)
        #expect(own.file == ExecutableFileID(st))
        #expect(own.sha256() == (try CallerProcessTests.systemDigest(expected)))
        // Cached: the same object for the same process.
        #expect(processes.executable(of: getpid()) === own)
        #expect(processes.count == 1)
    }

    @Test("a thread id answers for its thread: the process's executable")
    func threadIdentifier() throws {
        let processes = CallerProcesses()
        let keeper = DispatchSemaphore(value: 0)
        let alive = DispatchSemaphore(value: 0)
        let tid = Mutex<pid_t>(0)
        let live = Thread {
            tid.withLock { $0 = CallerProcessTests.currentThreadId() }
            alive.signal()
            keeper.wait()
        }
        live.start()
        alive.wait()
        defer { keeper.signal() }
        let threadId = tid.withLock { $0 }
        #expect(threadId > 0 && threadId != getpid())
        let executable = processes.executable(of: threadId)
        #expect(executable.path == CallerProcessTests.realPath("/proc/self/exe"))
        #expect(executable.process?.pid == threadId)
    }

    @Test("a child that exits is gone; a new process gets its own executable, never the old one's")
    func childExitsAndNewProcess() throws {
        let processes = CallerProcesses()
        let sleeper = try CallerProcessTests.spawn("/bin/sleep", ["30"])
        let first = processes.executable(of: sleeper)
        #expect(first.path == CallerProcessTests.realPath("/bin/sleep"))
        #expect(first.sha256() == (try CallerProcessTests.systemDigest(CallerProcessTests.realPath("/bin/sleep"))))
        CallerProcessTests.stop(sleeper)
        let gone = processes.executable(of: sleeper)
        #expect(gone.path == "" && gone.file == nil, "an exited pid: \(gone.path)")
        // tail -f waits (cat would end at once on an empty stdin).
        let tail = try CallerProcessTests.spawn("/usr/bin/tail", ["-f", "/dev/null"])
        defer { CallerProcessTests.stop(tail) }
        let second = processes.executable(of: tail)
        #expect(second.path == CallerProcessTests.realPath("/usr/bin/tail"))
        #expect(second !== first)
    }

    /// A /proc-like directory for `pid` whose exe -> `target` (a real file, so statx follows it).
    static func fakeProcess(_ root: String, pid: Int = 4242, exe target: String) throws {
        let directory = root + "/\(pid)"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory + "/exe", withDestinationPath: target)
    }

    @Test("a pid that runs another executable file (execve, or the pid reused) is read again")
    func anotherExecutableIsReadAgain() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let processes = CallerProcesses(procRoot: root.path)
        try CallerProcessTests.fakeProcess(root.path, exe: "/bin/cat")
        let before = processes.executable(of: 4242)
        #expect(before.path == "/bin/cat")
        var st = stat()
        #expect(stat("/bin/cat", &st) == 0)
        #expect(before.process?.pid == 4242 && before.file == ExecutableFileID(st))
        #expect(processes.executable(of: 4242) === before)
        try CallerProcessTests.fakeProcess(root.path, exe: "/bin/sleep")
        let after = processes.executable(of: 4242)
        #expect(after.path == "/bin/sleep")
        #expect(stat("/bin/sleep", &st) == 0)
        #expect(after.file == ExecutableFileID(st))
        #expect(processes.count == 2)
    }

    @Test("a real process that execs another program is that program from then on")
    func execIsSeen() throws {
        let root = try TempDirectory(prefix: "mamfs-exec")
        let fifo = root.path + "/go"
        #expect(mkfifo(fifo, 0o600) == 0)
        let processes = CallerProcesses()
        let shell = CallerProcessTests.realPath("/bin/sh")
        let tail = CallerProcessTests.realPath("/usr/bin/tail")
        let pid = try CallerProcessTests.spawn("/bin/sh", ["-c", "read line < \(shellQuote(fifo)); exec /usr/bin/tail -f /dev/null"])
        defer { CallerProcessTests.stop(pid) }
        #expect(processes.executable(of: pid).path == shell)
        let writer = open(fifo, O_WRONLY)
        #expect(writer >= 0)
        _ = "go\n".withCString { write(writer, $0, 3) }
        close(writer)
        // The exec happens in the child's own time: wait for its exe to change (10 s, nominal).
        Patience.waitUntil(10, every: 0.01) {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) == tail
        }
        #expect(processes.executable(of: pid).path == tail)
    }

    @Test("a file with several hard links: the path the process runs it by, checked on every lookup")
    func hardLinkedExecutablePath() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let files = try TempDirectory(prefix: "mamfs-links")
        let first = files.path + "/applet-a", second = files.path + "/applet-b"
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: first))
        #expect(link(first, second) == 0)
        let processes = CallerProcesses(procRoot: root.path)
        try CallerProcessTests.fakeProcess(root.path, exe: first)
        #expect(processes.executable(of: 4242).path == first)
        try CallerProcessTests.fakeProcess(root.path, exe: second)
        #expect(processes.executable(of: 4242).path == second)
    }

    @Test("a deleted executable keeps its path without the kernel's suffix")
    func deletedSuffixIsStripped() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let processes = CallerProcesses(procRoot: root.path)
        try CallerProcessTests.fakeProcess(root.path, exe: "/opt/app/bin/tool (deleted)")
        let executable = processes.executable(of: 4242)
        #expect(executable.path == "/opt/app/bin/tool")
        #expect(executable.file == nil)
        #expect(executable.sha256() == nil)
    }

    @Test("the cache is bounded: the least recently used process goes first")
    func boundedLeastRecentlyUsed() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let processes = CallerProcesses(capacity: 2, procRoot: root.path)
        for pid in [1, 2] {
            try CallerProcessTests.fakeProcess(root.path, pid: pid, exe: "/bin/cat")
            _ = processes.executable(of: pid_t(pid))
        }
        let second = processes.executable(of: 2)
        #expect(processes.count == 2)
        try CallerProcessTests.fakeProcess(root.path, pid: 3, exe: "/bin/cat")
        let third = processes.executable(of: 3)
        #expect(processes.count == 2)
        // Pid 1 was used least recently: gone (read again: a new object); 2 and 3 stayed.
        #expect(processes.executable(of: 2) === second)
        #expect(processes.executable(of: 3) === third)
        #expect(processes.count == 2)
    }

    @Test("decisions are kept per state generation: a new generation asks again, an older one never overwrites it")
    func decisionMemoGenerations() {
        let executable = CallerExecutable(path: "/bin/cat", file: nil, process: nil, digests: ExecutableDigests())
        let key = CallerExecutable.DecisionKey(action: .open(reading: true, writing: false), owner: "a", location: .localDrive)
        let denied = AccessDecision(verdict: .denied, rule: "sendData=managedApps", newOwner: nil, errno: EACCES)
        var asked = 0
        #expect(executable.decision(key, generation: 5) { asked += 1; return denied } == denied)
        #expect(executable.decision(key, generation: 5) { asked += 1; return .allowed() } == denied)
        #expect(asked == 1)
        #expect(executable.decision(key, generation: 6) { asked += 1; return .allowed() } == .allowed())
        #expect(asked == 2)
        // A decision made under generation 5 (computed before 6 arrived) is not kept over 6's.
        #expect(executable.decision(key, generation: 5) { asked += 1; return denied } == denied)
        #expect(executable.decision(key, generation: 6) { asked += 1; return denied } == .allowed())
        #expect(asked == 3)
        // Another question is asked on its own.
        let other = CallerExecutable.DecisionKey(action: .open(reading: true, writing: true), owner: "a", location: .localDrive)
        #expect(executable.decision(other, generation: 6) { asked += 1; return denied } == denied)
        #expect(asked == 4)
    }

    @Test("the digest cache computes once per executable file")
    func digestComputedOnce() throws {
        let digests = ExecutableDigests()
        var st = stat()
        #expect(stat("/bin/cat", &st) == 0)
        let id = ExecutableFileID(st)
        var calls = 0
        let first = digests.digest(of: id) { calls += 1; return "aa" }
        let second = digests.digest(of: id) { calls += 1; return "bb" }
        #expect(first == "aa" && second == "aa" && calls == 1)
    }

    @Test("a FIFO at the executable's path gives no digest at once, never a worker held in open(2)")
    func fifoAtTheExecutablePathDoesNotBlock() throws {
        let files = try TempDirectory(prefix: "mamfs-exe")
        let fifo = files.path + "/tool"
        #expect(mkfifo(fifo, 0o600) == 0)
        var fifoStat = stat(), cat = stat()
        #expect(stat(fifo, &fifoStat) == 0 && stat("/bin/cat", &cat) == 0)
        // The identity of another file (the process's image, as read before the name was
        // replaced), then the FIFO's own identity: neither may block or hash the FIFO.
        for file in [ExecutableFileID(cat), ExecutableFileID(fifoStat)] {
            let executable = CallerExecutable(path: fifo, file: file, process: nil, digests: ExecutableDigests())
            let finished = DispatchSemaphore(value: 0)
            let digest = Mutex<String??>(nil)
            Thread.detachNewThread {
                let value = executable.sha256()
                digest.withLock { $0 = .some(value) }
                finished.signal()
            }
            let answered = finished.wait(timeout: .now() + 5) == .success
            if !answered {
                // Release the worker held in open(2) so the test process can go on.
                let writer = open(fifo, O_RDWR | O_NONBLOCK)
                finished.wait()
                close(writer)
            }
            #expect(answered, "sha256() waited in open(2) on a FIFO")
            #expect(digest.withLock { $0 } == .some(nil))
        }
    }

    @Test("the digest of a descriptor is the file's sha256sum; a pipe is an error, not a digest")
    func digestOfADescriptor() throws {
        let opened = open("/bin/cat", O_RDONLY | O_CLOEXEC)
        #expect(opened >= 0)
        defer { close(opened) }
        #expect(try SHA256.hex(ofDescriptor: opened) == (try CallerProcessTests.systemDigest(CallerProcessTests.realPath("/bin/cat"))))
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        #expect(throws: MAMError.self) { try SHA256.hex(ofDescriptor: ends[0]) }
    }
}
