import Foundation
import Testing
import MAMProtection
@testable import MAMFS
import MAMTestSupport

/// Faults found reviewing the daemon: each test is named after what broke.
@Suite("Daemon robustness")
struct DaemonRobustnessTests {
    @Test("Names that are not UTF-8 keep their bytes (files, directories, symlink targets, renames)",
          arguments: MountedFixture.Kind.allCases)
    func nonUTF8NamesKeepTheirBytes(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let script = m.base + "/names.py"
            try Data("""
            import os, sys
            d = os.fsencode(sys.argv[1])
            f, sub, link, moved = b"caf\\xe9", b"d\\xff", b"l\\xfd", b"m\\xe0v\\xe9"
            with open(os.path.join(d, f), "wb") as h: h.write(b"bytes")
            os.mkdir(os.path.join(d, sub))
            os.symlink(b"t\\xfe", os.path.join(d, link))
            os.rename(os.path.join(d, f), os.path.join(d, sub, moved))
            print(sorted(os.listdir(d)), os.listdir(os.path.join(d, sub)), os.readlink(os.path.join(d, link)))
            print(open(os.path.join(d, sub, moved), "rb").read(), os.stat(os.path.join(d, sub, moved)).st_size)
            """.utf8).write(to: URL(fileURLWithPath: script))
            let r = try shell("python3 \(shellQuote(script)) \(shellQuote(m.mountpoint)) && python3 -c 'import os, sys; print(sorted(os.listdir(os.fsencode(sys.argv[1]))))' \(shellQuote(m.backing))")
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == """
            [b'd\\xff', b'l\\xfd'] [b'm\\xe0v\\xe9'] b't\\xfe'
            b'bytes' 5
            [b'd\\xff', b'l\\xfd']

            """)
        }
    }

    @Test("The daemon's descriptors return to the baseline after cp -a of /usr/share/doc and rm -rf",
          .enabled(if: !MountedFixture.useInProcess, "needs the daemon's own /proc/<pid>/fd"),
          arguments: MountedFixture.Kind.allCases)
    func descriptorsReturnToBaseline(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let baseline = try #require(m.daemonDescriptorCount())
            let r = try m.sh("cp -a /usr/share/doc copy && diff -r --no-dereference /usr/share/doc copy && echo same && rm -rf copy")
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "same\n")
            // FORGETs for removed nodes arrive asynchronously.
            #expect(m.waitForDescriptorCount { $0 == baseline } == baseline)
        }
    }

    @Test("Protecting a file with its own owner again keeps no extra descriptor and open handles still read",
          .enabled(if: !MountedFixture.useInProcess, "needs the daemon's own /proc/<pid>/fd"))
    func reprotectingKeepsDescriptorsAndOpenHandles() throws {
        try withMount(.managed) { m in
            let w = try m.sh("echo data > f")
            #expect(w.status == 0)
            // The open descriptor keeps the node (and its entry) alive across the calls.
            let r = try m.sh("""
            exec 3<f; ls -l /proc/$(pgrep -f "mount $B $M" | head -1)/fd | wc -l; \
            for i in $(seq 30); do setfattr -n user.mam.owner -v "$ACCT" f || exit 1; done; \
            ls -l /proc/$(pgrep -f "mount $B $M" | head -1)/fd | wc -l; cat <&3
            """)
            #expect(r.status == 0, "\(r.err)")
            let lines = r.out.split(separator: "\n").map(String.init)
            #expect(lines.count == 3 && lines[2] == "data", "\(r.out)")
            if lines.count == 3, let before = Int(lines[0]), let after = Int(lines[1]) {
                #expect(after - before < 5, "descriptors \(before) -> \(after)")
            }
        }
    }

    @Test("A daemon started with a low soft open-file limit serves more files than that limit",
          .enabled(if: !MountedFixture.useInProcess, "starts its own mamfs mount daemon"))
    func daemonRaisesOpenFileLimit() throws {
        try withMount(.unmanaged) { m in
            let mountpoint = m.base + "/lowlimit"
            defer {
                FuseMounts.unmount(mountpoint)
            }
            let r = try m.sh("""
            mkdir -p "$BASE/lowb" "$BASE/lowlimit" && \
            ( ulimit -Sn 256 && "$MAMFS" mount "$BASE/lowb" "$BASE/lowlimit" --state "$S" ) && \
            cd "$BASE/lowlimit" && mkdir d && for i in $(seq 600); do echo $i > d/f$i || exit 1; done && \
            ls -l d | grep -c ' f' && cat d/f600
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "600\n600\n")
        }
    }

    @Test("Worker threads are kept, not ended and re-created, and stay within the cap across bursts of parallel requests",
          .enabled(if: !MountedFixture.useInProcess, "needs the daemon's own /proc/<pid>/task"))
    func workerThreadsPersistWithinTheCap() throws {
        try withMount(.managed) { m in
            let pid = try #require(m.daemonPID)
            // The session's workers, by the name each gives itself at its first read of
            // /dev/fuse. The daemon's other threads (Dispatch's among them, which end when idle
            // for a few seconds) are not workers and may come and go.
            func threads() -> Set<String> {
                let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
                #expect(all.count <= MountDaemon.workerThreads + 6, "\(all.count) threads at once")
                return Set(all.filter {
                    (try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/comm", encoding: .utf8)) == "mamfs-fuse\n"
                })
            }
            // Each burst: 8 writers and 8 readers at once, then removal (the cycle that made the
            // old configuration end and re-create workers, fragmenting the heap).
            let burst = """
            for i in 1 2 3 4 5 6 7 8; do dd if=/dev/urandom of=f$i bs=64k count=64 conv=fsync status=none & done; wait; \
            for i in 1 2 3 4 5 6 7 8; do cat f$i > /dev/null & done; wait; rm -f f1 f2 f3 f4 f5 f6 f7 f8
            """
            #expect(try m.sh(burst).status == 0)
            let first = threads()
            #expect(!first.isEmpty)
            var seen = first
            for _ in 0..<4 {
                #expect(try m.sh(burst).status == 0)
                let now = threads()
                #expect(seen.isSubset(of: now), "workers ended: \(seen.subtracting(now).sorted())")
                seen.formUnion(now)
            }
            #expect(seen.count <= MountDaemon.workerThreads, "\(seen.count) workers over the run")
        }
    }

    @Test("The daemon's descriptor table holds the node descriptors it may keep from the start, so no create waits for the kernel to grow it",
          .enabled(if: !MountedFixture.useInProcess, "needs the daemon's own /proc/<pid>/status"))
    func descriptorTableReservedAtStart() throws {
        try withMount(.managed) { m in
            let pid = try #require(m.daemonPID)
            let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
            let row = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
            let fields = row.split(separator: " ", omittingEmptySubsequences: true)
            let soft = try #require(fields.count > 3 ? (fields[3] == "unlimited" ? UInt64.max : UInt64(fields[3])) : nil)
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            let size = try #require(status.split(separator: "\n").first { $0.hasPrefix("FDSize:") }
                .flatMap { Int($0.dropFirst("FDSize:".count).trimmingCharacters(in: .whitespaces)) })
            let wanted = MountDaemon.descriptorSlots(softLimit: soft)
            #expect(wanted > 1024)
            #expect(size >= wanted, "FDSize \(size), wanted \(wanted) (soft limit \(soft))")
            // Opening many files through the mount does not grow it further.
            #expect(try m.sh("mkdir d && for i in $(seq 300); do : > d/f$i || exit 1; done").status == 0)
            let after = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            #expect(after.contains("FDSize:\t\(size)\n"), "\(after.split(separator: "\n").filter { $0.hasPrefix("FDSize") })")
        }
    }

    @Test("The daemon allocates from at most one malloc arena per CPU (two at least), however many workers bursts wake",
          .enabled(if: !MountedFixture.useInProcess, "needs the daemon's own /proc/<pid>/maps"),
          .enabled(if: sysconf(Int32(_SC_NPROCESSORS_ONLN)) <= 4, "the cap must be below the workers a burst wakes"))
    func mallocArenasStayWithinTheCPUs() throws {
        try withMount(.managed) { m in
            let pid = try #require(m.daemonPID)
            // Sixteen writers, then sixteen readers at once: every worker up to the cap runs.
            let burst = """
            for i in $(seq 16); do dd if=/dev/urandom of=f$i bs=64k count=16 status=none & done; wait; \
            for i in $(seq 16); do cat f$i > /dev/null & stat f$i > /dev/null & done; wait; rm -f f*
            """
            for _ in 0..<3 { #expect(try m.sh(burst).status == 0) }
            let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count ?? 0
            let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
            let heaps = Self.mallocHeaps(maps)
            let cap = Int(MallocArenas.cap(cpus: sysconf(Int32(_SC_NPROCESSORS_ONLN))))
            // The main arena grows by brk; every other arena is one 64 MiB heap here.
            #expect(threads > cap, "too few threads (\(threads)) to tell")
            #expect(heaps >= 0 && heaps <= cap - 1, "\(heaps) thread arenas for \(threads) threads, cap \(cap)")
        }
    }

    /// The glibc thread-arena heaps in a /proc/PID/maps listing: anonymous read-write mappings
    /// at a 64 MiB boundary (HEAP_MAX_SIZE on 64-bit) whose rest up to the next boundary is
    /// reserved (---p) or used.
    static func mallocHeaps(_ maps: String) -> Int {
        let heapSize: UInt64 = 64 << 20
        let rows = maps.split(separator: "\n").compactMap { line -> (start: UInt64, end: UInt64, perms: Substring, anonymous: Bool)? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5 else { return nil }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16) else { return nil }
            return (start, end, fields[1], fields.count == 5)
        }
        var count = 0
        for (i, row) in rows.enumerated() where row.anonymous && row.perms == "rw-p" && row.start % heapSize == 0 {
            var end = row.end
            var next = i + 1
            while end < row.start + heapSize, next < rows.count, rows[next].start == end, rows[next].anonymous, rows[next].perms == "---p" {
                end = rows[next].end
                next += 1
            }
            if end == row.start + heapSize { count += 1 }
        }
        return count
    }

    @Test("rmdir after rm of many files, and of a directory whose unlinked file a client still holds, completes",
          arguments: MountedFixture.Kind.allCases)
    func rmdirAfterUnlinksCompletes(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            mkdir -p t/d && for i in $(seq 300); do echo $i > t/d/f$i || exit 1; done && rm -rf t && echo removed && \
            mkdir held && echo data > held/f && python3 -c '
            import os, time
            fd = os.open("held/f", os.O_PATH)
            os.unlink("held/f")
            start = time.monotonic()
            os.rmdir("held")
            print("rmdir", "fast" if time.monotonic() - start < 2 else "slow", os.path.exists("held"))
            os.close(fd)
            ' && ls
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "removed\nrmdir fast False\n", "\(r.err)")
            #expect(!FileManager.default.fileExists(atPath: m.backing + "/held"))
        }
    }

    @Test("A user's own mount (no allow_other, so no default_permissions) still enforces the backing permissions",
          .enabled(if: !MountedFixture.useInProcess && geteuid() == 0, "mounts as user nobody"))
    func nonRootMountEnforcesPermissions() throws {
        try withMount(.unmanaged) { m in
            let r = try m.shAsNobody("""
            D=$1; M=$2
            mkdir -p "$D/b" "$D/m" && "$M" init --state "$D/st" >/dev/null && "$M" mount "$D/b" "$D/m" --state "$D/st" || exit 1
            cd "$D/m" || exit 1
            echo secret > r && chmod 0200 r && stat -c '%A %s' r
            test -r r && echo readable || echo not-readable
            cat r 2>/dev/null || echo cat-denied
            echo x > w && chmod 0444 w && (test -w w && echo writable || echo not-writable)
            (echo y >> w) 2>/dev/null || echo append-denied
            test -x w && echo executable || echo not-executable
            mkdir d && chmod 0 d && ((cd d) 2>/dev/null || echo cd-denied) && (ls d >/dev/null 2>&1 || echo ls-denied)
            setfattr -n user.mam.owner -v '' w 2>/dev/null || echo protect-denied
            chmod 0600 r && cat r w
            cd / && fusermount3 -u "$D/m"
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == """
            --w------- 7
            not-readable
            cat-denied
            not-writable
            append-denied
            not-executable
            cd-denied
            ls-denied
            protect-denied
            secret
            x

            """, "\(r.err)")
        }
    }
}
