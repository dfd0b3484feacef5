import Foundation
import MAMProtection
import Testing
import MAMTestSupport

/// `mamfs provider sync` of a replica makes the fetched files durable a batch at a time
/// (docs/PERFORMANCE.md, "Replicated first sync: fsyncs"): counted with strace, and checked
/// after a kill at an arbitrary moment.
@Suite("CLI: replicated first sync, durability per batch")
struct ProviderSyncDurabilityTests {
    static let strace = ["/usr/bin/strace", "/bin/strace"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let sqlite3 = ["/usr/bin/sqlite3", "/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// A sandbox with the demo account and a remote of `count` files in 20 directories (sizes
    /// 1-20 KiB, every 100th 1 MiB); returns it with the remote's path and its files.
    static func remoteTree(count: Int) throws -> (Sandbox, String, [String: Data]) {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        var files: [String: Data] = [:]
        for i in 0..<count {
            let relative = "d\(i % 20)/f\(i).txt"
            var generator = SplitMix64(seed: UInt64(i))
            let size = i % 100 == 99 ? 1 << 20 : Int(generator.next() % 20_000) + 1
            files[relative] = Data((0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            try sandbox.write("remote/" + relative, files[relative]!)
        }
        return (sandbox, sandbox.path("remote"), files)
    }

    /// Regular files below `root` outside the provider's metadata directory (relative paths).
    static func replicaFiles(_ root: String) -> [String] {
        regularFiles(under: root).filter { !$0.hasPrefix(".mamfs-provider/") }
    }

    @Test("a first sync of 600 files makes a few fsync, fdatasync and syncfs calls, not three per file",
          .enabled(if: strace != nil, "needs strace"))
    func fewSyncCalls() throws {
        let (sandbox, remote, files) = try Self.remoteTree(count: 600)
        let local = sandbox.path("local")
        let counts = sandbox.path("strace.txt")
        let result = try runProcess(Self.strace!, ["-f", "-c", "-e", "trace=fsync,fdatasync,syncfs", "-o", counts, MamfsBinary.path,
                                                   "provider", "sync", local, "--remote", remote, "--account", Fixtures.upn,
                                                   "--state", sandbox.state], environment: sandbox.environment)
        #expect(result.status == 0, "\(result.err)")
        #expect(Self.replicaFiles(local).count == files.count)
        var calls: [String: Int] = [:]
        for line in try String(contentsOfFile: counts, encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let name = fields.last, ["fsync", "fdatasync", "syncfs"].contains(String(name)), fields.count >= 5,
                  let count = Int(fields[3]) else { continue }
            calls[String(name)] = count
        }
        // 600 files and 20 directories in batches of 512: two batches, two syncfs each. The
        // rest is SQLite's (its WAL checkpoints). Before batching: three fsyncs per file.
        #expect(calls["syncfs"] == 4, "\(calls)")
        #expect(calls.values.reduce(0, +) < 40, "\(calls)")
    }

    @Test("a first sync killed at an arbitrary moment: every recorded item is in place as recorded, every file in the replica is complete, no temp file stays, and the next sync finishes without conflict copies",
          .enabled(if: sqlite3 != nil, "needs sqlite3"))
    func killedFirstSync() throws {
        let (sandbox, remote, files) = try Self.remoteTree(count: 1500)
        let local = sandbox.path("local")
        let sync = try BackgroundProcess(MamfsBinary.path, ["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn,
                                                            "--state", sandbox.state], environment: sandbox.environment)
        // Killed as soon as the first files are renamed into the replica: in the middle of a
        // batch's renames, or between them and the records (or later, on a fast machine).
        sync.wait(timeout: 60) { _ in !Self.replicaFiles(local).isEmpty }
        sync.signal(SIGKILL)
        #expect(sync.waitForExit(timeout: 20) != nil)

        let context = try ProtectionContext.open(stateDirectory: StateDirectory(path: sandbox.state), passphraseFile: nil)
        func plaintext(_ path: String) throws -> Data {
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else { throw MAMError.fromErrno(path) }
            defer { close(fd) }
            let content = try context.openContent(fd: fd)
            var bytes = [UInt8](repeating: 0, count: Int(try content.plaintextSize()))
            let n = try bytes.withUnsafeMutableBytes { try content.read(into: $0, at: 0) }
            return Data(bytes.prefix(n))
        }
        // Every file under a final name is a complete provided copy.
        let present = Self.replicaFiles(local)
        for relative in present {
            #expect(try plaintext(local + "/" + relative) == files[relative], "\(relative) is complete")
        }
        // Every recorded item is in place with the stamp it was recorded with.
        let query = try runProcess(Self.sqlite3!, ["-separator", "|", local + "/.mamfs-provider/provider.db",
                                                   "SELECT type, local_path, local_inode, local_size, local_mtime FROM items WHERE local_path != ''"],
                                   environment: sandbox.environment)
        #expect(query.status == 0, "\(query.err)")
        var recorded = 0
        for line in query.out.split(separator: "\n") {
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 5, fields[0] == "file" else { continue }
            recorded += 1
            var st = stat()
            guard lstat(local + "/" + fields[1], &st) == 0 else {
                Issue.record("\(fields[1]) is recorded but not in the replica")
                continue
            }
            let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            #expect(fields[2] == String(st.st_ino) && fields[3] == String(st.st_size) && fields[4] == String(mtime),
                    "\(fields[1]) in place as recorded")
        }
        #expect(recorded <= present.count)

        let again = try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn])
        #expect(again.status == 0, "\(again.err)")
        let after = Self.replicaFiles(local)
        #expect(after.filter { $0.contains("(conflict ") }.isEmpty, "no conflict copies: \(after.filter { $0.contains("(conflict ") })")
        #expect(after.sorted() == files.keys.sorted())
        for relative in after { #expect(try plaintext(local + "/" + relative) == files[relative], "\(relative)") }
        #expect(regularFiles(under: local).filter { $0.contains(".mamfs-tmp-") }.isEmpty, "no temp file left")
        #expect(regularFiles(under: remote).count == files.count, "nothing uploaded")
    }
}
