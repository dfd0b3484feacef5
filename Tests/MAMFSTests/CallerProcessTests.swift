import Foundation
import Glibc
import MAMTestSupport
import Synchronization
import Testing
@testable import MAMFS

/// The caller's executable, read from /proc and cached per (pid, start time).
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

    @Test("field 22 of a stat line whose command name holds ')' and spaces")
    func startTimeAfterTheLastParenthesis() {
        let fields = (3...52).map { $0 == 22 ? "987654321" : "\($0)" }.joined(separator: " ")
        let line = Array("4242 (evil) 1 2 3 (x) y) ".utf8) + Array(fields.utf8) + [10]
        #expect(CallerProcesses.startTime(statLine: line) == 987_654_321)
        #expect(CallerProcesses.startTime(statLine: Array("12 (short) S 1 2".utf8)) == nil)
        #expect(CallerProcesses.startTime(statLine: Array("no parenthesis".utf8)) == nil)
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

    /// A /proc-like directory for pid 4242 with a stat line of `startTime` and exe -> `target`.
    static func fakeProcess(_ root: String, startTime: UInt64, exe target: String) throws {
        let directory = root + "/4242"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fields = (3...52).map { $0 == 22 ? "\(startTime)" : "0" }.joined(separator: " ")
        try Data("4242 (prog) \(fields)\n".utf8).write(to: URL(fileURLWithPath: directory + "/stat"))
        try FileManager.default.createSymbolicLink(atPath: directory + "/exe", withDestinationPath: target)
    }

    @Test("a reused pid (same pid, another start time) is read again, not taken from the cache")
    func reusedPidIsANewProcess() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let processes = CallerProcesses(procRoot: root.path)
        try CallerProcessTests.fakeProcess(root.path, startTime: 100, exe: "/bin/cat")
        let before = processes.executable(of: 4242)
        #expect(before.path == "/bin/cat")
        #expect(before.process == ProcessKey(pid: 4242, startTime: 100))
        try CallerProcessTests.fakeProcess(root.path, startTime: 100, exe: "/bin/sleep")
        // The same process (same start time): the cached executable.
        #expect(processes.executable(of: 4242).path == "/bin/cat")
        try CallerProcessTests.fakeProcess(root.path, startTime: 200, exe: "/bin/sleep")
        let after = processes.executable(of: 4242)
        #expect(after.path == "/bin/sleep")
        #expect(after.process == ProcessKey(pid: 4242, startTime: 200))
        #expect(processes.count == 2)
    }

    @Test("a deleted executable keeps its path without the kernel's suffix")
    func deletedSuffixIsStripped() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let processes = CallerProcesses(procRoot: root.path)
        try CallerProcessTests.fakeProcess(root.path, startTime: 7, exe: "/opt/app/bin/tool (deleted)")
        let executable = processes.executable(of: 4242)
        #expect(executable.path == "/opt/app/bin/tool")
        #expect(executable.file == nil)
        #expect(executable.sha256() == nil)
    }

    @Test("the cache is bounded: the least recently used process goes first")
    func boundedLeastRecentlyUsed() throws {
        let root = try TempDirectory(prefix: "mamfs-proc")
        let processes = CallerProcesses(capacity: 2, procRoot: root.path)
        for (start, exe) in [(1, "/bin/cat"), (2, "/bin/sleep")] as [(UInt64, String)] {
            try CallerProcessTests.fakeProcess(root.path, startTime: start, exe: exe)
            _ = processes.executable(of: 4242)
        }
        #expect(processes.count == 2)
        try CallerProcessTests.fakeProcess(root.path, startTime: 3, exe: "/bin/ls")
        _ = processes.executable(of: 4242)
        #expect(processes.count == 2)
        // Start time 1 was used least recently: read again from the (now changed) entry.
        try CallerProcessTests.fakeProcess(root.path, startTime: 1, exe: "/bin/true")
        #expect(processes.executable(of: 4242).path == "/bin/true")
        // Start time 3 stayed.
        try CallerProcessTests.fakeProcess(root.path, startTime: 3, exe: "/bin/false")
        #expect(processes.executable(of: 4242).path == "/bin/ls")
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
}
