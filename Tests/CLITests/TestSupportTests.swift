import Foundation
import Synchronization
import Testing
import MAMTestSupport

@Suite("MAMTestSupport")
struct TestSupportTests {
    @Test("runProcess: stdin in, stdout and stderr bytes out, the exit status")
    func capturesOutputs() throws {
        let result = try runProcess("/bin/bash", ["-c", "cat; printf 'e\\377' >&2; exit 3"], stdin: Data([0, 1, 0xFF]),
                                    environment: [:])
        #expect(result.status == 3)
        #expect(result.stdout == Data([0, 1, 0xFF]))
        #expect(result.stderr == Data([0x65, 0xFF]))
    }

    @Test("runProcess: killed by a signal is 128 + N; the timeout kills the whole group and is 124")
    func signalsAndTimeout() throws {
        #expect(try runProcess("/bin/bash", ["-c", "kill -TERM $$"], environment: [:]).status == 128 + SIGTERM)
        let marker = try TempDirectory().file("survived")
        let started = Date()
        let result = try shell("(sleep 3; touch \(shellQuote(marker))) & sleep 30", timeout: 1)
        #expect(result.status == 124)
        #expect(result.err.hasSuffix("(timed out after 1 s)"))
        #expect(Date().timeIntervalSince(started) < 10)
        sleep(4)
        #expect(!FileManager.default.fileExists(atPath: marker), "the background child outlived the timeout")
    }

    @Test("Patience: a wait returns once its condition holds; one that never holds lasts its nominal bound times the factor, then checks once more")
    func patienceStretchesBoundsOnly() throws {
        #expect(Patience.factor >= 1)
        #expect(Patience.bound(2.5) == 2.5 * Patience.factor)

        var calls = 0
        var started = Date()
        #expect(Patience.waitUntil(60, every: 0.01) { calls += 1; return calls == 3 })
        #expect(calls == 3)
        #expect(Date().timeIntervalSince(started) < 5, "a wait whose condition held did not return at once")

        calls = 0
        started = Date()
        #expect(!Patience.waitUntil(0.1, every: 0.01) { calls += 1; return false })
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= Patience.bound(0.1) && waited < Patience.bound(0.1) + 5, "\(waited) s")
        #expect(calls >= 2)

        calls = 0
        #expect(Patience.waitUntil(0, every: 0.01) { calls += 1; return true }, "the last check counts")
        #expect(calls == 1)
        struct Stop: Error {}
        #expect(throws: Stop.self) { try Patience.waitUntil(60) { throw Stop() } }
    }

    @Test("writeExecutable: the bytes at mode 0755, replacing the file, runnable at once 200 times while other threads start processes (no ETXTBSY)")
    func executableRunsAtOnce() throws {
        let dir = try TempDirectory(prefix: "mamfs-exec")
        let path = dir.file("tool.sh")
        try writeExecutable(path, "#!/bin/sh\necho first\n")
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o7777 == 0o755)
        #expect(try runProcess(path, [], environment: [:]).out == "first\n")
        let stop = Atomic<Bool>(false)
        let spawners = (0..<2).map { _ in
            Thread {
                while !stop.load(ordering: .relaxed) { _ = try? runProcess("/bin/true", [], environment: [:]) }
            }
        }
        spawners.forEach { $0.start() }
        defer { stop.store(true, ordering: .relaxed) }
        for i in 0..<200 {
            try writeExecutable(path, "#!/bin/sh\necho \(i)\n")
            let result = try runProcess(path, [], environment: [:])
            #expect(result.status == 0 && result.out == "\(i)\n", "\(i): \(result.err)")
            if result.status != 0 { break }
        }
        #expect(regularFiles(under: dir.path) == ["tool.sh"], "no temporary file is left")
    }

    @Test("the child inherits only stdin, stdout and stderr")
    func noInheritedDescriptors() throws {
        let fd = open("/dev/null", O_RDONLY)
        #expect(fd > 2)
        defer { close(fd) }
        // ls itself, not a shell running a pipeline (the shell holds the pipes' ends while it
        // starts the pipeline), and it holds the listing's directory as the lowest free one, 3.
        let result = try shell("exec ls -1 /proc/self/fd")
        #expect(result.out == "0\n1\n2\n3\n", "\(result.out)")
    }

    @Test("a descriptor another thread opens without O_CLOEXEC while a child starts does not reach the child")
    func noDescriptorsFromOtherThreads() throws {
        let stop = Atomic<Bool>(false)
        let opener = Thread {
            while !stop.load(ordering: .relaxed) {
                let fd = open("/dev/null", O_RDONLY)
                if fd >= 0 { close(fd) }
            }
        }
        opener.start()
        defer { stop.store(true, ordering: .relaxed) }
        var leaks: [String] = []
        for _ in 0..<40 {
            // ls itself holds the listing's directory as the lowest free descriptor, 3.
            let result = try shell("exec ls -1 /proc/self/fd")
            if result.out != "0\n1\n2\n3\n" { leaks.append(result.out) }
        }
        #expect(leaks.isEmpty, "children saw \(leaks.count) extra descriptors: \(leaks.prefix(3))")
    }

    @Test("shell's environment: no MAMFS_STATE, C locale, UTC, extra values")
    func shellEnvironment() throws {
        setenv("MAMFS_STATE", "/nowhere", 1)
        defer { unsetenv("MAMFS_STATE") }
        let result = try shell("echo \"${MAMFS_STATE-unset} $LC_ALL $TZ $X\"", environment: ["X": "x y"])
        #expect(result.out == "unset C UTC x y\n")
    }

    @Test("SplitMix64 replays the reference sequence; randomBytes replays its seed")
    func generators() {
        var rng = SplitMix64(seed: 0)
        #expect([rng.next(), rng.next(), rng.next()] == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
        #expect(randomBytes(16, seed: 7) == randomBytes(16, seed: 7))
        #expect(randomBytes(16, seed: 7) != randomBytes(16, seed: 8))
        #expect(randomBytes(3, seed: 42) == [0x52, 0xD2, 0x1F])
    }

    @Test("FuseMounts: / is mounted, a plain directory is not, unmount of a plain directory is a no-op")
    func mountQueries() throws {
        let directory = try TempDirectory()
        #expect(FuseMounts.isMounted("/"))
        #expect(!FuseMounts.isMounted(directory.path))
        #expect(FuseMounts.unmount(directory.path))
        #expect(FuseMounts.daemonPIDs(serving: directory.path).isEmpty)
    }

    @Test("TempDirectory: unique, 0700, removed with a read-only directory inside")
    func temporaryDirectories() throws {
        var path = ""
        do {
            let a = try TempDirectory(prefix: "mamfs-support")
            let b = try TempDirectory(prefix: "mamfs-support")
            #expect(a.path != b.path && a.path.hasPrefix("/tmp/mamfs-support-"))
            var st = stat()
            #expect(stat(a.path, &st) == 0 && st.st_mode & 0o777 == 0o700)
            try FileManager.default.createDirectory(atPath: a.file("ro/sub"), withIntermediateDirectories: true)
            chmod(a.file("ro"), 0o500)
            path = a.path
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
