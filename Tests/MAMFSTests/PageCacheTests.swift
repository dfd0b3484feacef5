import Foundation
import Testing
import MAMProtection
@testable import MAMFS
import MAMTestSupport

/// Read-only handles bypass the kernel's page cache (FOPEN_DIRECT_IO) unless the mount has
/// `-o page_cache`; see MountOptions.pageCache for the trade-off (the truncate-and-rewrite race is the reason).
@Suite("Direct I/O for read-only handles, -o page_cache")
struct PageCacheTests {
    /// Maps the same file four ways and prints what each gives.
    private static let mmapScript = """
    import os, sys, mmap
    f = os.path.join(sys.argv[1], "m")
    with open(f, "wb") as h: h.write(b"hello mmap" * 1000)
    fd = os.open(f, os.O_RDONLY)
    try:
        m = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        print("shared-ro", m[:10], len(m))
        m.close()
    except OSError as e:
        print("shared-ro errno", e.errno)
    p = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
    print("private", p[:10], len(p))
    p.close(); os.close(fd)
    fd = os.open(f, os.O_RDWR)
    m = mmap.mmap(fd, 0)
    m[0:5] = b"HELLO"; m.flush(); m.close(); os.close(fd)
    print("shared-rw", open(f, "rb").read(10))
    """

    private func runMmap(_ m: MountedFixture) throws -> ProcessResult {
        let script = m.base + "/mapping.py"  // not mmap.py: it would shadow the module
        try Data(PageCacheTests.mmapScript.utf8).write(to: URL(fileURLWithPath: script))
        return try shell("python3 \(shellQuote(script)) \(shellQuote(m.mountpoint))")
    }

    @Test("A read-only descriptor, opened with direct I/O, maps MAP_SHARED; private and read-write mmap work",
          arguments: MountedFixture.Kind.allCases)
    func sharedReadOnlyMmapWithDirectIO(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try runMmap(m)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "shared-ro b'hello mmap' 10000\nprivate b'hello mmap' 10000\nshared-rw b'HELLO mmap'\n")
        }
    }

    @Test("With -o page_cache a read-only descriptor maps MAP_SHARED", arguments: MountedFixture.Kind.allCases)
    func sharedReadOnlyMmapWithPageCache(kind: MountedFixture.Kind) throws {
        try withMount(kind, options: ["page_cache"]) { m in
            let r = try runMmap(m)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "shared-ro b'hello mmap' 10000\nprivate b'hello mmap' 10000\nshared-rw b'HELLO mmap'\n")
        }
    }

    @Test("A binary copied into the mount runs (exec maps it MAP_PRIVATE)", arguments: MountedFixture.Kind.allCases)
    func execFromMount(kind: MountedFixture.Kind) throws {
        for options in [[], ["page_cache"]] {
            try withMount(kind, options: options) { m in
                let r = try m.sh("cp \"$(command -v env)\" ./env2 && ./env2 echo exec-ok")
                #expect(r.status == 0, "\(options) \(r.err)")
                #expect(r.out == "exec-ok\n", "\(options)")
            }
        }
    }

    @Test("1 MiB reads on a read-only descriptor reach mamfs whole and read back exact bytes",
          arguments: MountedFixture.Kind.allCases)
    func largeDirectReads(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let w = try m.sh("head -c 16777216 /dev/urandom > \"$BASE/src\" && cp \"$BASE/src\" big && sync")
            #expect(w.status == 0, "\(w.err)")
            let before = daemonReadCalls(m)
            let r = try m.sh("""
            python3 -c '
            import os, hashlib
            fd = os.open("big", os.O_RDONLY)
            h = hashlib.sha256(); sizes = set()
            for i in range(16):
                b = os.pread(fd, 1 << 20, i << 20); sizes.add(len(b)); h.update(b)
            print(sorted(sizes), h.hexdigest())
            ' && sha256sum < "$BASE/src" | cut -d" " -f1
            """)
            let after = daemonReadCalls(m)
            let lines = r.out.split(separator: "\n").map(String.init)
            #expect(r.status == 0 && lines.count == 2, "\(r.out) \(r.err)")
            #expect(lines.first == "[1048576] " + (lines.last ?? "-"))
            // 16 requests of 1 MiB: each one read of /dev/fuse and, encrypted, 4 backing preads of
            // 256 KiB. Split into 128 KiB requests it would be >= 256 calls, into 4 KiB >= 8192.
            if let before, let after {
                #expect(after - before < 200, "read calls: \(after - before)")
            }
        }
    }

    /// syscr of the daemon (nil for in-process mounts, whose counts include the tests).
    private func daemonReadCalls(_ m: MountedFixture) -> Int? {
        guard let pid = m.daemonPID, let io = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
        let line = io.split(separator: "\n").first { $0.hasPrefix("syscr:") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") }
    }

    @Test("-o page_cache and -o log=FILE are mamfs options: parsed, never passed to libfuse; bad forms refused")
    func mamfsOwnOptions() throws {
        try MountPlanFixture.with { f in
            var options = f.options(["page_cache,log=\(f.base)/log", "ro"])
            let plan = try MountDaemon.prepare(&options, context: f.context)
            #expect(options.pageCache)
            #expect(options.logFile == f.base + "/log")
            #expect(!plan.fuseOptions.contains { $0.hasPrefix("page_cache") || $0.hasPrefix("log") })
            #expect(plan.fuseOptions.contains("ro"))
            for bad in ["page_cache=1", "log=", "=", "=x", "attr_timeout="] {
                var options = f.options([bad])
                #expect(throws: MAMError.self, "-o \(bad)") { try MountDaemon.prepare(&options, context: f.context) }
            }
        }
    }
}
