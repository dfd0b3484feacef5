import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// A 4 MiB tmpfs mounted for one test and always unmounted (lazily as a fallback).
final class SmallTmpfs {
    let path: String
    private var mounted = false

    init(size: String = "4m") throws {
        path = "/tmp/mamfs-full-\(UUID().uuidString.prefix(10).lowercased())"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let result = try shell("mount -t tmpfs -o size=\(size),mode=0755 tmpfs \(shellQuote(path))", timeout: 20)
        guard result.status == 0 else { throw TestSupportError("mount tmpfs failed: \(result.err)") }
        mounted = true
    }

    func close() {
        guard mounted else { return }
        mounted = false
        if (try? shell("umount \(shellQuote(path))", timeout: 20))?.status != 0 {
            _ = try? shell("umount -l \(shellQuote(path))", timeout: 20)
        }
        try? FileManager.default.removeItem(atPath: path)
    }

    deinit { close() }
}

/// Part 3: the backing directory (and, in one variant, the state) on a full 4 MiB tmpfs.
@Suite("Full backing disk")
struct FullDiskTests {
    enum Layout: String, CaseIterable, Sendable {
        case backingOnly = "backing on tmpfs"
        case stateToo = "backing and state on tmpfs"
    }

    struct Arguments: CustomTestStringConvertible, Sendable {
        let kind: RobustMount.Kind
        let layout: Layout
        var testDescription: String { "\(kind.rawValue), \(layout.rawValue)" }
    }

    static let cases: [Arguments] = RobustMount.Kind.allCases.flatMap { kind in Layout.allCases.map { Arguments(kind: kind, layout: $0) } }

    @Test("Writers until ENOSPC: fsynced files intact, the failure is ENOSPC, no torn block, state intact", arguments: cases)
    func fillUntilENOSPC(_ arguments: Arguments) throws {
        let start = Date()
        let disk = try SmallTmpfs()
        defer { disk.close() }
        let mount = try RobustMount(arguments.kind, backing: disk.path + "/backing",
                                    state: arguments.layout == .stateToo ? disk.path + "/state" : nil)
        defer { mount.close() }
        let script = Robust.root + "/Tests/RobustnessTests/Scripts/fill_writer.py"
        let journals = (0..<3).map { mount.base + "/fill-\($0)" }
        let writers = try (0..<3).map { try spawnPython(script, [mount.mountpoint, journals[$0], "\($0 + 1)"]) }
        let deadline = Date().addingTimeInterval(Patience.bound(90))
        while writers.contains(where: { $0.isRunning }) && Date() < deadline { usleep(50_000) }
        let hung = writers.contains { $0.isRunning }
        killAndReap(writers)
        #expect(!hung, "a writer hung on the full disk")

        var failures: [String] = []
        var completed: [(String, Int, String)] = []
        var failed: [(String, String, String, Int, String)] = []
        for journal in journals {
            let text = (try? String(contentsOfFile: journal, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") {
                let f = line.split(separator: " ").map(String.init)
                if f.first == "S", f.count == 4 { completed.append((f[1], Int(f[2]) ?? -1, f[3])) }
                if f.first == "E", f.count == 6 { failed.append((f[1], f[2], f[3], Int(f[4]) ?? -1, f[5])) }
            }
        }
        for (name, op, errnoName, _, _) in failed where errnoName != "ENOSPC" {
            failures.append("\(name): \(op) failed with \(errnoName), expected ENOSPC")
        }
        if failed.isEmpty { failures.append("no writer reached ENOSPC") }

        func check(_ phase: String) throws {
            let contents = try readAll(mount.mountpoint)
            for (rel, value) in contents where (value.first as? String) == "error" {
                failures.append("\(phase): reading \(rel): \(value[1])")
            }
            for (name, size, sha) in completed {
                let got = contents[name]
                if (got?.first as? Int) != size || (got?.last as? String) != sha {
                    failures.append("\(phase): fsynced \(name) (\(size) B) reads back as \(String(describing: got))")
                }
            }
            for (name, op, _, written, sha) in failed where op != "open" {
                // Bytes write() reported written stay exactly those bytes. (That the file may
                // also grow by part of the failed write is the open bug in
                // failedWriteLeavesNoPartialData below.)
                let got = contents[name]
                let prefix = try shell("head -c \(written) \(shellQuote(mount.mountpoint + "/" + name)) | sha256sum", timeout: 30)
                if ((got?.first as? Int) ?? -1) < written || !prefix.out.hasPrefix(sha) {
                    failures.append("\(phase): \(name) failed in \(op) after \(written) B reported written, reads back as \(String(describing: got))")
                }
            }
            for rel in regularFiles(under: mount.backing) {
                if let fault = backingFault(mount.backing + "/" + rel) { failures.append("\(phase): backing \(rel): \(fault)") }
            }
            let integrity = try shell("sqlite3 \(shellQuote(mount.state + "/state.db")) 'PRAGMA integrity_check'", timeout: 30)
            if integrity.out.trimmingCharacters(in: .whitespacesAndNewlines) != "ok" {
                failures.append("\(phase): state.db integrity_check: \(integrity.out) \(integrity.err)")
            }
        }
        try check("while full")
        // The CLI still reads its state on the full disk, and the mount survives a remount.
        let accounts = try mount.mamfs(["accounts", "--json"], check: false)
        if accounts.status != 0 || !accounts.out.contains(RobustMount.account) {
            failures.append("mamfs accounts on the full disk: \(accounts.status) \(accounts.err)")
        }
        mount.close()
        try mount.mount()
        try check("after remount")
        // Freeing space makes writes work again.
        // Remove completed files until at least 256 KiB is free again (one file may be small:
        // which writer finished first depends on scheduling).
        var freed = 0
        for (victim, size, _) in completed where freed < 256 * 1024 {
            if unlink(mount.mountpoint + "/" + victim) == 0 { freed += max(size, 0) }
        }
        let again = try mount.sh("head -c 100000 /dev/urandom > again && sync again && cmp <(head -c 100000 again) again && stat -c %s again")
        if again.out.trimmingCharacters(in: .whitespacesAndNewlines) != "100000" { failures.append("writing after freeing space: \(again.out) \(again.err)") }
        print("full disk \(arguments.testDescription): \(completed.count) files completed, \(failed.count) failures \(Set(failed.map { "\($0.1):\($0.2)" })), \(elapsed(start))")
        let report = failures.prefix(40).joined(separator: "\n")
        let logTail = String(mount.logText.suffix(2000))
        #expect(failures.isEmpty, "\(failures.count) faults:\n\(report)\n--- log ---\n\(logTail)")
    }

    /// A mount of `kind` whose backing directory is on a 1 MiB tmpfs, both gone afterwards.
    private func withMountOnSmallDisk(_ kind: RobustMount.Kind, _ body: (SmallTmpfs, RobustMount) throws -> Void) throws {
        let disk = try SmallTmpfs(size: "1m")
        defer { disk.close() }
        let mount = try RobustMount(kind, backing: disk.path + "/backing")
        defer { mount.close() }
        try body(disk, mount)
    }

    /// A program that grows a file with ftruncate and fills it through a shared map (a
    /// database, a download manager) leaves holes that only the kernel's writeback fills. On a
    /// full disk that writeback fails; the file must then read back whole, every page either
    /// what was stored or zeros, never EIO from a torn block.
    @Test("Regression: a shared map written back on a full disk fails with ENOSPC and every page still reads",
          arguments: RobustMount.Kind.allCases)
    func sharedMapWritebackOnAFullDisk(kind: RobustMount.Kind) throws {
        try withMountOnSmallDisk(kind) { disk, mount in
            // Grows "f" to 2 MiB (holes), fills the disk but 64 KiB, writes every page through a
            // shared map; prints the errno of msync (0: none).
            let write = try mount.sh(#"""
            python3 - \#(shellQuote(disk.path)) <<'EOF'
            import mmap, os, sys
            fd = os.open("f", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, b"head" * 1024)
            os.ftruncate(fd, 2 << 20)
            filler = os.open(os.path.join(sys.argv[1], "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                while True:
                    os.write(filler, bytes(4096))
            except OSError:
                pass
            os.ftruncate(filler, os.fstat(filler).st_size - (64 << 10))
            os.close(filler)
            m = mmap.mmap(fd, 2 << 20, mmap.MAP_SHARED)
            for page in range(1, 512):
                m[page * 4096:(page + 1) * 4096] = bytes([page % 251 + 1]) * 4096
            code = 0
            try:
                m.flush()
            except OSError as e:
                code = e.errno
            m.close()
            try:
                os.close(fd)
            except OSError as e:
                code = code or e.errno
            print(code)
            EOF
            """#, timeout: 60)
            #expect(write.status == 0, "\(write.err)")
            #expect(write.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(ENOSPC)", "msync: \(write.out)")
            // From the backing file, not the page cache: every page is its own bytes or zeros.
            mount.close()
            try mount.mount()
            let read = try mount.sh(#"""
            python3 - <<'EOF'
            fd = open("f", "rb")
            data = fd.read()
            bad = [p for p in range(1, 512) if data[p * 4096:(p + 1) * 4096] not in (bytes([p % 251 + 1]) * 4096, bytes(4096))]
            print(len(data), data[:4096] == b"head" * 1024, bad[:5])
            EOF
            """#, timeout: 60)
            #expect(read.status == 0 && read.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(2 << 20) True []",
                    "reading back: \(read.out) \(read.err)")
            #expect(backingFault(mount.backing + "/f") == nil)
        }
    }

    /// An owner change rewrites files (a decrypted copy renamed over each). With the backing
    /// disk full it fails with ENOSPC (not EIO: the data is fine) and every file stays as it
    /// was. With the state's disk full it either succeeds or fails before any file is
    /// rewritten (the protect is recorded first): never a reported failure with the work files
    /// already declassified.
    @Test("Regression: an owner change on a full disk is ENOSPC with no file changed, or done")
    func ownerChangeOnAFullDisk() throws {
        let disk = try SmallTmpfs(size: "4m")
        defer { disk.close() }
        let stateDisk = try SmallTmpfs(size: "2m")
        defer { stateDisk.close() }
        let mount = try RobustMount(.managed, backing: disk.path + "/backing", state: stateDisk.path + "/state")
        defer { mount.close() }
        let made = try mount.sh("mkdir d && head -c 200000 /dev/urandom > a && head -c 100000 /dev/urandom > d/x && sha256sum a d/x")
        let filesOf = ["a": ["a"], "d": ["d/x"]]
        let ownerBefore = try mount.sh("getfattr --only-values -n user.mam.owner d 2>&1").out
        try #require(made.status == 0, "\(made.err)")
        /// Fills `filesystem` (a file outside the backing and state directories), runs the owner
        /// changes and prints their errno names, then frees the space again.
        func ownerChanges(filling filesystem: String) throws -> String {
            let r = try mount.sh(#"""
            python3 - \#(shellQuote(filesystem)) <<'EOF'
            import errno, os, sys
            filler = os.open(os.path.join(sys.argv[1], "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
            for chunk in (1 << 20, 4096, 512):
                try:
                    while True: os.write(filler, bytes(chunk))
                except OSError:
                    pass
            os.close(filler)
            for name in ("a", "d"):
                try:
                    os.setxattr(name, "user.mam.owner", b"")
                    print("ok", end=" ")
                except OSError as e:
                    print(errno.errorcode[e.errno], end=" ")
            os.unlink(os.path.join(sys.argv[1], "filler"))
            EOF
            """#, timeout: 60)
            #expect(r.status == 0, "\(r.err)")
            return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func backingHeader(_ file: String) throws -> ProtectedFileHeader? {
            let fd = open(mount.backing + "/" + file, O_RDONLY | O_CLOEXEC)
            try #require(fd >= 0)
            defer { close(fd) }
            return try ProtectedFileHeader.read(fd: fd)
        }
        /// Each owner change either failed with ENOSPC and left its files as they were, or
        /// succeeded and declassified them; the bytes read the same either way.
        func expectConsistent(_ results: String, _ phase: String, mayChange: Bool) throws {
            let answers = results.split(separator: " ").map(String.init)
            try #require(answers.count == 2, "\(phase): \(results)")
            for (name, answer) in zip(["a", "d"], answers) {
                #expect(answer == "ENOSPC" || (mayChange && answer == "ok"), "\(phase): owner change of \(name): \(answer)")
                for file in filesOf[name]! {
                    let header = try backingHeader(file)
                    if answer == "ok" {
                        #expect(header?.owner == "" && header?.isEncrypted == false, "\(phase): \(file) not declassified")
                    } else {
                        #expect(header?.owner == RobustMount.account && header?.isEncrypted == true, "\(phase): \(file) changed by a failed owner change")
                    }
                }
            }
            let sums = try mount.sh("sha256sum a d/x")
            #expect(sums.out == made.out, "\(phase): \(sums.out) \(sums.err)")
            // A failed change leaves the directory's owner as it was too.
            let directoryOwner = try mount.sh("getfattr --only-values -n user.mam.owner d 2>&1").out
            #expect(directoryOwner == (answers[1] == "ok" ? "" : ownerBefore), "\(phase): d is owned by '\(directoryOwner)'")
        }
        try expectConsistent(try ownerChanges(filling: disk.path), "backing disk full", mayChange: false)
        try expectConsistent(try ownerChanges(filling: stateDisk.path), "state disk full", mayChange: true)
        // With room again the same change goes through.
        #expect(try mount.sh("setfattr -n user.mam.owner -v '' a d && sha256sum a d/x").out == made.out)
        let header = try backingHeader("a")
        #expect(header?.owner == "" && header?.isEncrypted == false)
    }

    /// A write that fails with ENOSPC must not change the file: a plain file system returns a
    /// short count for what it stored and ENOSPC only when it stored nothing.
    @Test("Regression: a write that reports ENOSPC leaves the file size at what write() reported",
          arguments: RobustMount.Kind.allCases)
    func failedWriteLeavesNoPartialData(kind: RobustMount.Kind) throws {
        try withMountOnSmallDisk(kind) { _, mount in
            // Writes 10000-byte chunks until one fails; prints "<reported total> <size after>".
            let result = try mount.sh(#"""
            python3 - <<'EOF'
            import os
            fd = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            total = 0
            try:
                while True:
                    total += os.write(fd, b"x" * 10000)
            except OSError as e:
                print(e.errno == 28, total, os.fstat(fd).st_size)
            EOF
            """#, timeout: 60)
            let fields = result.out.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            #expect(fields.count == 3 && fields[0] == "True", "\(result.out) \(result.err)")
            #expect(fields.count == 3 && fields[1] == fields[2], "reported written \(fields.dropFirst().first ?? "?") B, file has \(fields.last ?? "?") B")
        }
    }
}
