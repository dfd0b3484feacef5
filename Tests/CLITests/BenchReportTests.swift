import Foundation
import Testing
import MAMTestSupport

/// Tools/bench/report.py's header: what it says about how busy the machine was.
@Suite("Bench report: the machine's state per round")
struct BenchReportTests {
    /// A run.py results file of two rounds: round 1 with /proc/stat counters (2,000 ticks, 100
    /// of them stolen), round 2 from a run.py that did not keep them.
    static let results = """
    {"started": "2026-12-03T20:00:00", "quick": false,
     "config": {"rounds": 2, "seq_mib": 512, "files": 5000, "dirs": 100, "fio_mib": 256, "fio_seconds": 20,
                "smallw_count": 131072, "cli_mib": 256, "cli_reps": 5},
     "machine": {"cpu": "test CPU", "vcpus": 2, "mem_mib": 1024, "kernel": "6.18", "disk": "/dev/vda ext4", "versions": {}},
     "mamfs": "mamfs", "baseline": null, "mounts": ["mamfs-enc", "securefs"], "placements": ["same"],
     "samples": [{"round": 1, "placement": "same", "mount": "mamfs-enc", "small_ls_s": 0.3},
                 {"round": 1, "placement": "same", "mount": "securefs", "small_ls_s": 0.4}],
     "daemon": [], "cli": [], "cli_base": [], "skipped": [], "setup": [],
     "loadavg": [{"round": 1, "start": "0.5 0.5 0.5", "end": "2.0 1.0 0.6", "cpu_start": [1000, 10], "cpu_end": [3000, 110]},
                 {"round": 2, "start": "2.0 1.0 0.6", "end": "2.1 1.1 0.7"}]}
    """

    @Test("report.py prints each round's steal time from run.py's /proc/stat counters, ? for a round without them")
    func stealPerRound() throws {
        let directory = try TempDirectory(prefix: "mamfs-bench-report")
        let path = directory.file("results.json")
        try Data(Self.results.utf8).write(to: URL(fileURLWithPath: path))
        let result = try runProcess("/usr/bin/env", ["python3", InstalledTree.repository + "/Tools/bench/report.py", path],
                                    environment: testEnvironment())
        #expect(result.status == 0, "\(result.err)")
        let report = try String(contentsOfFile: directory.file("report.md"), encoding: .utf8)
        let lines = report.split(separator: "\n").map(String.init)
        #expect(lines.contains("- Steal time per round (the share of the VM's CPU time the host gave to others): r1: 5.0%, r2: ?"),
                "\(report.prefix(1500))")
    }

    /// Round 1 of `split` with fuse-floor: randread beyond the floor (15,000 IOPS against the
    /// best peer's 14,000 is 1.07x, under the 1.1x target), tar x within it.
    static let floorResults = """
    {"started": "2026-12-07T08:00:00", "quick": false,
     "config": {"rounds": 1, "seq_mib": 512, "files": 5000, "dirs": 100, "fio_mib": 256, "fio_seconds": 20,
                "smallw_count": 131072, "cli_mib": 256, "cli_reps": 5},
     "machine": {"cpu": "test CPU", "vcpus": 2, "mem_mib": 1024, "kernel": "6.18", "disk": "/dev/vda ext4", "versions": {}},
     "mamfs": "mamfs", "baseline": null, "mounts": ["fuse-floor", "gocryptfs", "securefs", "mamfs-enc"], "placements": ["split"],
     "samples": [{"round": 1, "placement": "split", "mount": "fuse-floor", "fio_randread_iops": 15000, "small_extract_s": 2.0},
                 {"round": 1, "placement": "split", "mount": "gocryptfs", "fio_randread_iops": 14000, "small_extract_s": 4.0},
                 {"round": 1, "placement": "split", "mount": "securefs", "fio_randread_iops": 13000, "small_extract_s": 3.0},
                 {"round": 1, "placement": "split", "mount": "mamfs-enc", "fio_randread_iops": 14500, "small_extract_s": 3.3}],
     "daemon": [], "cli": [], "cli_base": [], "skipped": [], "setup": [],
     "loadavg": [{"round": 1, "start": "0.5 0.5 0.5", "end": "2.0 1.0 0.6"}]}
    """

    /// The same round with fuse-floor-io: randread beyond it too (14,500 IOPS, 1.04x gocryptfs),
    /// tar x at securefs's time (3.0 s): beyond it as well.
    static let floorIOResults = floorResults
        .replacingOccurrences(of: #""mounts": ["fuse-floor","#, with: #""mounts": ["fuse-floor", "fuse-floor-io","#)
        .replacingOccurrences(of: #""samples": ["#, with: #"""
            "samples": [{"round": 1, "placement": "split", "mount": "fuse-floor-io", "fio_randread_iops": 14500, "small_extract_s": 3.0},
            """#)

    /// The same round with fuse-floor-crypt as well: randread beyond it (14,800 IOPS, 1.06x
    /// gocryptfs), tar x within it (2.6 s, 0.87x securefs).
    static let floorCryptResults = floorIOResults
        .replacingOccurrences(of: #""mounts": ["fuse-floor", "fuse-floor-io","#, with: #""mounts": ["fuse-floor", "fuse-floor-io", "fuse-floor-crypt","#)
        .replacingOccurrences(of: #""samples": ["#, with: #"""
            "samples": [{"round": 1, "placement": "split", "mount": "fuse-floor-crypt", "fio_randread_iops": 14800, "small_extract_s": 2.6},
            """#)

    /// Round 1 of `same`, the cold sequential read only: raw from the host's cache at 1,650 MB/s,
    /// fuse-floor-io at 569 (0.34x: the raw target beyond it), mamfs-enc at 455.
    static let sameReadResults = """
    {"started": "2026-12-07T08:00:00", "quick": false,
     "config": {"rounds": 1, "seq_mib": 512, "files": 5000, "dirs": 100, "fio_mib": 256, "fio_seconds": 20,
                "smallw_count": 131072, "cli_mib": 256, "cli_reps": 5},
     "machine": {"cpu": "test CPU", "vcpus": 2, "mem_mib": 1024, "kernel": "6.18", "disk": "/dev/vda ext4", "versions": {}},
     "mamfs": "mamfs", "baseline": null, "mounts": ["raw", "fuse-floor", "fuse-floor-io", "gocryptfs", "mamfs-enc"], "placements": ["same"],
     "samples": [{"round": 1, "placement": "same", "mount": "raw", "seq_read_MBps": 1650},
                 {"round": 1, "placement": "same", "mount": "fuse-floor", "seq_read_MBps": 5947},
                 {"round": 1, "placement": "same", "mount": "fuse-floor-io", "seq_read_MBps": 569},
                 {"round": 1, "placement": "same", "mount": "gocryptfs", "seq_read_MBps": 360},
                 {"round": 1, "placement": "same", "mount": "mamfs-enc", "seq_read_MBps": 455}],
     "daemon": [], "cli": [], "cli_base": [], "skipped": [], "setup": [],
     "loadavg": [{"round": 1, "start": "0.5 0.5 0.5", "end": "2.0 1.0 0.6"}]}
    """

    @Test("report.py sets each target's best peer against fuse-floor, fuse-floor-io and fuse-floor-crypt, and marks a target beyond each")
    func floorSection() throws {
        let directory = try TempDirectory(prefix: "mamfs-bench-report")
        // fuse-floor-io alone: the same round without fuse-floor.
        let ioAlone = Self.floorIOResults
            .replacingOccurrences(of: #""mounts": ["fuse-floor", "fuse-floor-io","#, with: #""mounts": ["fuse-floor-io","#)
            .replacingOccurrences(of: #"{"round": 1, "placement": "split", "mount": "fuse-floor", "fio_randread_iops": 15000, "small_extract_s": 2.0},"#,
                                  with: "")
        #expect(ioAlone.contains(#""mounts": ["fuse-floor-io","#) && !ioAlone.contains(#""mount": "fuse-floor","#))
        for (name, results) in [("floor", Self.floorResults), ("none", Self.results), ("io", Self.floorIOResults),
                                ("ioAlone", ioAlone), ("sameRead", Self.sameReadResults), ("crypt", Self.floorCryptResults)] {
            let path = directory.file("\(name)/results.json")
            try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
            try Data(results.utf8).write(to: URL(fileURLWithPath: path))
            let result = try runProcess("/usr/bin/env", ["python3", InstalledTree.repository + "/Tools/bench/report.py", path],
                                        environment: testEnvironment())
            #expect(result.status == 0, "\(result.err)")
        }
        /// The report written for the case `name`, whole and by line.
        func written(_ name: String) throws -> (String, [String]) {
            let text = try String(contentsOfFile: directory.file("\(name)/report.md"), encoding: .utf8)
            return (text, text.split(separator: "\n").map(String.init))
        }
        let (report, lines) = try written("floor")
        #expect(lines.contains("| split | 2 small files: tar x | <= 0.9x | securefs | 0.67 | 1.10 | 1.65 |"), "\(report)")
        #expect(lines.contains("| split | 3 fio 4 KiB randread | >= 1.1x | gocryptfs | 1.07 **beyond the floor** | 1.04 | 0.97 |"),
                "\(report)")
        let section = lines.drop { $0 != "## The round trips alone (fuse-floor)" }.dropFirst().prefix { !$0.hasPrefix("## ") }
        #expect(section.filter { $0.hasPrefix("| split | ") }.count == 2, "only the metrics the floor and a peer both have")
        let (without, _) = try written("none")
        #expect(!without.contains("fuse-floor"))
        #expect(!report.contains("floor-io"))

        let (withDisk, ioLines) = try written("io")
        #expect(ioLines.contains("| placement | workload | target | best encrypted peer | floor / best | mamfs-enc / best "
                                 + "| mamfs-enc / floor | floor-io / best | mamfs-enc / floor-io |"), "\(withDisk)")
        #expect(ioLines.contains("| split | 2 small files: tar x | <= 0.9x | securefs | 0.67 | 1.10 | 1.65 "
                                 + "| 1.00 **beyond the floor with its disk** | 1.10 |"), "\(withDisk)")
        #expect(ioLines.contains("| split | 3 fio 4 KiB randread | >= 1.1x | gocryptfs | 1.07 **beyond the floor** | 1.04 | 0.97 "
                                 + "| 1.04 **beyond the floor with its disk** | 1.00 |"), "\(withDisk)")

        let (alone, aloneLines) = try written("ioAlone")
        #expect(aloneLines.contains("## The round trips alone (fuse-floor-io)"), "\(alone)")
        #expect(aloneLines.contains("| placement | workload | target | best encrypted peer | mamfs-enc / best "
                                    + "| floor-io / best | mamfs-enc / floor-io |"), "\(alone)")
        #expect(aloneLines.contains("|---|---|---|---|---|---|---|"), "\(alone)")
        #expect(aloneLines.contains("| split | 3 fio 4 KiB randread | >= 1.1x | gocryptfs | 1.04 "
                                    + "| 1.04 **beyond the floor with its disk** | 1.00 |"), "\(alone)")

        // In `same`, the read against raw gets its own row, raw in the peer's column; not in `split`.
        let (sameRead, sameReadLines) = try written("sameRead")
        #expect(sameReadLines.contains("| same | 1 sequential read (cold cache) | >= 1.25x | gocryptfs | 16.52 | 1.26 | 0.08 "
                                       + "| 1.58 | 0.80 |"), "\(sameRead)")
        #expect(sameReadLines.contains("| same | 1 sequential read (cold cache) | >= 0.85x | raw | 3.60 | 0.28 | 0.08 "
                                       + "| 0.34 **beyond the floor with its disk** | 0.80 |"), "\(sameRead)")
        #expect(sameRead.contains("has a row of its own, with raw in the best peer's column"), "\(sameRead)")
        #expect(!withDisk.contains("| raw |") && !withDisk.contains("row of its own"), "\(withDisk)")
        #expect(!withDisk.contains("floor-crypt"), "\(withDisk)")

        // fuse-floor-crypt's columns after fuse-floor-io's, marked where it misses the target.
        let (withCipher, cryptLines) = try written("crypt")
        #expect(cryptLines.contains("| placement | workload | target | best encrypted peer | floor / best | mamfs-enc / best "
                                    + "| mamfs-enc / floor | floor-io / best | mamfs-enc / floor-io | floor-crypt / best "
                                    + "| mamfs-enc / floor-crypt |"), "\(withCipher)")
        #expect(cryptLines.contains("| split | 2 small files: tar x | <= 0.9x | securefs | 0.67 | 1.10 | 1.65 "
                                    + "| 1.00 **beyond the floor with its disk** | 1.10 | 0.87 | 1.27 |"), "\(withCipher)")
        #expect(cryptLines.contains("| split | 3 fio 4 KiB randread | >= 1.1x | gocryptfs | 1.07 **beyond the floor** | 1.04 | 0.97 "
                                    + "| 1.04 **beyond the floor with its disk** | 1.00 "
                                    + "| 1.06 **beyond the floor with its disk and cipher** | 0.98 |"), "\(withCipher)")
        #expect(withCipher.contains("fuse-floor-crypt is fuse-floor-io that also seals each block with AES-256-GCM"), "\(withCipher)")
    }

    @Test("run.py's counters are the VM's total and steal ticks: steal never exceeds the total, and both only grow")
    func counters() throws {
        let script = """
        import sys, time
        sys.path.insert(0, sys.argv[1])
        import run
        a = run.cpu_counters(); time.sleep(0.2); b = run.cpu_counters()
        print(len(a), 0 <= a[1] <= a[0], b[0] > a[0], b[1] >= a[1])
        """
        let result = try runProcess("/usr/bin/env", ["python3", "-c", script, InstalledTree.repository + "/Tools/bench"],
                                    environment: testEnvironment())
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out == "2 True True True\n")
    }

    @Test("run.py with a --workdir that is not a directory exits 1 with one line naming it, before it makes anything")
    func missingWorkdir() throws {
        let directory = try TempDirectory(prefix: "mamfs-bench-workdir")
        let out = directory.file("out")
        for workdir in [directory.file("missing"), "/etc/hostname"] {
            let result = try runProcess("/usr/bin/env", ["python3", InstalledTree.repository + "/Tools/bench/run.py", "--mamfs", "/bin/true",
                                                         "--only", "mamfs-enc", "--workloads", "seq", "--workdir", workdir, "--out", out],
                                        environment: testEnvironment())
            #expect(result.status == 1)
            #expect(result.err == "--workdir \(workdir): not a directory\n", "\(result.err)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }
}
