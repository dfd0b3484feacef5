import Foundation
import Testing
import MAMTestSupport

/// Tools/bench/fuse_floor.c, the bench's "fuse-floor" mount: it must keep the names, sizes,
/// modes and errors of what the workloads do (or their requests are not mamfs's), and it keeps
/// no data (a read answers zeros).
@Suite("Bench floor filesystem")
struct BenchFloorTests {
    @Test("fuse-floor keeps names, sizes, modes and errno, answers zeros, and unmounts cleanly",
          .enabled(if: fuseUsable), .timeLimit(.minutes(2)))
    func keepsMetadataNotData() throws {
        let directory = try TempDirectory(prefix: "mamfs-bench-floor")
        let mountpoint = directory.file("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        // Built as the bench builds it.
        let script = "import sys; sys.path.insert(0, sys.argv[1]); import run; print(run.build_fuse_floor(sys.argv[2]))"
        let built = try runProcess("/usr/bin/env", ["python3", "-c", script, InstalledTree.repository + "/Tools/bench", directory.path],
                                   environment: testEnvironment())
        try #require(built.status == 0, "\(built.err)")
        let binary = built.out.trimmingCharacters(in: .newlines)
        #expect(binary == directory.file("fuse_floor"))
        let daemon = try BackgroundProcess(binary, [mountpoint, "-f"], environment: testEnvironment())
        defer { FuseMounts.tearDown(mountpoint); daemon.stop() }
        try #require(daemon.wait(until: { _ in FuseMounts.isMounted(mountpoint) }), "\(daemon.err)")

        let commands = """
        set -u
        cd \(shellQuote(mountpoint))
        mkdir -p d/e && printf abc > d/f && chmod 640 d/f
        stat -c '%s %a %F' d/f d/e
        od -An -tx1 d/f
        mv d/f d/g && ls d
        rmdir d 2>&1; echo "rmdir=$?"
        mkdir d 2>&1; echo "mkdir=$?"
        cat d/missing 2>&1; echo "cat=$?"
        truncate -s 8192 d/g && stat -c %s d/g && head -c 8192 d/g | tr -d '\\0' | wc -c
        rm d/g && rmdir d/e d && ls -A | wc -l
        """
        let result = try shell(commands)
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out == """
        3 640 regular file
        0 755 directory
         00 00 00
        e
        g
        rmdir: failed to remove 'd': Directory not empty
        rmdir=1
        mkdir: cannot create directory 'd': File exists
        mkdir=1
        cat: d/missing: No such file or directory
        cat=1
        8192
        0
        0

        """, "\(result.out)")

        #expect(FuseMounts.unmount(mountpoint))
        #expect(daemon.waitForExit() == 0, "\(daemon.err)")
    }
}
