import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// Part 6: concurrency at scale through several processes, everything under timeouts.
@Suite("Concurrency at scale")
struct ConcurrencyTests {
    enum Scenario: String, CaseIterable, Sendable {
        case rw, names, truncate
    }

    struct Arguments: CustomTestStringConvertible, Sendable {
        let kind: RobustMount.Kind
        let scenario: Scenario
        var testDescription: String { "\(scenario.rawValue), \(kind.rawValue)" }
    }

    static let cases: [Arguments] = RobustMount.Kind.allCases.flatMap { kind in Scenario.allCases.map { Arguments(kind: kind, scenario: $0) } }

    @Test("Parallel processes: readers/writers on one file, creates+renames in one dir, truncate races (no EIO, no deadlock)",
          arguments: cases)
    func scenario(_ arguments: Arguments) throws {
        let start = Date()
        let mount = try RobustMount(arguments.kind)
        defer { mount.close() }
        let scale = Robust.soak ? Robust.knob("CONCURRENCY_SCALE", 20_000) : 2000
        let dir = mount.mountpoint + "/c"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let script = Robust.root + "/Tests/RobustnessTests/Scripts/concurrency.py"
        let result = try shell("python3 \(shellQuote(script)) \(arguments.scenario.rawValue) \(shellQuote(dir)) \(scale)",
                               timeout: Robust.soak ? 3600 : 150)
        print("concurrency \(arguments.testDescription): \(result.out.trimmingCharacters(in: .whitespacesAndNewlines).suffix(300)) \(elapsed(start))")
        #expect(result.status != 124, "deadlock or hang: timed out")
        #expect(result.status == 0, "\(result.out.suffix(3000))\n\(result.err.suffix(2000))")
        for rel in regularFiles(under: mount.backing) {
            #expect(backingFault(mount.backing + "/" + rel) == nil, "backing \(rel): \(backingFault(mount.backing + "/" + rel) ?? "")")
        }
        #expect(mount.daemonPIDs.count == 1, "the daemon died")
    }

    @Test("A writer and `mamfs wipe` at the same time: both finish, nothing of the account stays readable")
    func writerDuringWipe() throws {
        let start = Date()
        let mount = try RobustMount(.managed)
        defer { mount.close() }
        // Some files before, then a writer that keeps creating files while the wipe runs.
        let seed = try mount.sh("mkdir -p w && for i in $(seq 1 200); do head -c $((i * 97)) /dev/urandom > w/pre-$i; done; echo ok", timeout: 60)
        #expect(seed.out.contains("ok"), "\(seed.err)")
        let loop = Process()
        loop.executableURL = URL(fileURLWithPath: "/bin/bash")
        loop.arguments = ["-c", "cd \(shellQuote(mount.mountpoint))/w && for i in $(seq 1 100000); do head -c 20000 /dev/urandom > during-$i 2>/dev/null; done"]
        loop.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        loop.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try loop.run()
        defer { killAndReap([loop]) }
        usleep(300_000)
        let wipe = try mount.mamfs(["wipe", RobustMount.account, "--root", mount.backing], check: false, timeout: 60)
        usleep(500_000)
        killAndReap([loop])
        #expect(wipe.status == 0, "wipe: \(wipe.status) \(wipe.err)")
        // The mount still answers; every file still tagged with the wiped account is unreadable
        // (EACCES), none gives EIO, and files made after the wipe belong to someone else.
        var failures: [String] = []
        var remaining = 0, ofAccount = 0
        for rel in regularFiles(under: mount.backing + "/w") {
            remaining += 1
            let fd = open(mount.backing + "/w/" + rel, O_RDONLY)
            let header = fd >= 0 ? (try? ProtectedFileHeader.read(fd: fd)) ?? nil : nil
            if fd >= 0 { close(fd) }
            let read = try shell("head -c 1 \(shellQuote(mount.mountpoint + "/w/" + rel)) | wc -c", timeout: 20)
            if read.status == 124 { failures.append("\(rel): read hung") }
            if header?.owner == RobustMount.account {
                ofAccount += 1
                if read.out.trimmingCharacters(in: .whitespacesAndNewlines) != "0" { failures.append("\(rel): wiped account's file is readable") }
            }
            if read.err.contains("Input/output error") { failures.append("\(rel): EIO") }
        }
        let ls = try mount.sh("ls w | wc -l", timeout: 20)
        print("wipe during writes: \(wipe.out.trimmingCharacters(in: .whitespacesAndNewlines)); \(remaining) files left, \(ofAccount) still tagged with the account; \(elapsed(start))")
        #expect(ls.status == 0, "the mount does not answer: \(ls.err)")
        #expect(failures.isEmpty, "\(failures.prefix(20).joined(separator: "\n"))")
        #expect(mount.daemonPIDs.count == 1, "the daemon died")
    }
}
