import Foundation
import Testing
import MAMTestSupport

@Suite("Security: wipe stays inside its roots and really destroys the keys")
struct SecurityWipeTests {
    /// A managed file (encrypted for the demo account) at `relative`, mode 0600.
    @discardableResult
    func managedFile(_ sandbox: Sandbox, _ relative: String, _ text: String) throws -> String {
        let path = try sandbox.write(relative, text)
        let result = try sandbox.run(["encrypt", path, "--account", Fixtures.account])
        guard result.status == 0 else { throw SandboxError.failed("encrypt", result) }
        chmod(path, 0o600)
        return path
    }

    @Test("a managed file reachable only through a symlink inside the root is not removed")
    func symlinkInsideRootIsNotFollowed() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let inside = try managedFile(sandbox, "root/work/mine.txt", "inside\n")
        let victim = try managedFile(sandbox, "outside/victim.txt", "root only\n")
        #expect(symlink(sandbox.path("outside"), sandbox.path("root/swapped")) == 0)
        let result = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path("root")])
        #expect(result.status == 0, "\(result.err)")
        #expect(!sandbox.exists(inside))
        #expect(sandbox.exists(victim), "the file behind the symlink was removed")
    }

    @Test("a known root whose parent was swapped for a symlink is skipped with a note")
    func knownRootWithSwappedParentIsSkipped() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        try managedFile(sandbox, "home/user/work/mine.txt", "mine\n")
        #expect(try sandbox.run(["protect", sandbox.path("home/user/work"), "-R", "--account", Fixtures.account]).status == 0)
        // Another user owning home/ swaps user/ for a symlink to a tree holding a root-only file.
        let victim = try managedFile(sandbox, "elsewhere/work/victim.txt", "root only\n")
        #expect(rename(sandbox.path("home/user"), sandbox.path("home/user.moved")) == 0)
        #expect(symlink(sandbox.path("elsewhere"), sandbox.path("home/user")) == 0)
        let result = try sandbox.run(["wipe", Fixtures.account])
        #expect(result.status == 0, "\(result.err)")
        #expect(sandbox.exists(victim), "the wipe followed the swapped parent")
        #expect(result.err.contains("symbolic link"), "\(result.err)")
        #expect(sandbox.exists(sandbox.path("home/user.moved/work/mine.txt")), "skipped, so still there")
    }

    @Test("--root that is a symlink is an error (66), nothing is wiped")
    func rootSymlinkIsAnError() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try managedFile(sandbox, "real/doc.txt", "doc\n")
        #expect(symlink(sandbox.path("real"), sandbox.path("link")) == 0)
        let result = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path("link")])
        #expect(result.status == 66, "\(result.status) \(result.err)")
        #expect(result.err.contains("symbolic link"), "\(result.err)")
        #expect(sandbox.exists(file))
        let accounts = try jsonArray(try sandbox.run(["accounts", "--json"]))
        #expect(accounts.first?["managed"] as? Bool == true, "the keys were destroyed anyway")
        let unenroll = try sandbox.run(["unenroll", Fixtures.account, "--wipe", "--root", sandbox.path("link")])
        #expect(unenroll.status == 66, "\(unenroll.err)")
    }

    @Test("a wipe names each entry it could not examine (a directory or file its user may not read, a damaged header) and wipes the rest",
          .enabled(if: geteuid() == 0, "runs the wipe as user nobody"))
    func unexaminedEntriesAreNamed() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let here = try managedFile(sandbox, "root/here.txt", "here\n")
        let locked = try managedFile(sandbox, "root/locked/secret.txt", "locked away\n")
        let shut = try managedFile(sandbox, "root/shut.txt", "shut\n")
        let damaged = try managedFile(sandbox, "root/damaged.bin", "damaged\n")
        #expect(truncate(damaged, 20) == 0)
        let chowned = try runProcess("/usr/bin/chown", ["-R", "65534:65534", sandbox.state, sandbox.path("root"), damaged],
                                     stdin: Data(), environment: sandbox.environment)
        try #require(chowned.status == 0, "\(chowned.err)")
        #expect(chown(sandbox.path("root/locked"), 0, 0) == 0 && chmod(sandbox.path("root/locked"), 0o700) == 0)
        #expect(chown(shut, 0, 0) == 0)
        let result = try runProcess("/usr/bin/setpriv",
                                    ["--reuid=65534", "--regid=65534", "--clear-groups", MamfsBinary.path,
                                     "wipe", Fixtures.account, "--root", sandbox.path("root"), "--state", sandbox.state],
                                    stdin: Data(), environment: sandbox.environment)
        #expect(result.status == 0, "\(result.err)")
        #expect(!sandbox.exists(here), "the readable file is wiped")
        for path in [locked, shut, damaged] { #expect(sandbox.exists(path), "\(path) stays") }
        let notes = result.err.split(separator: "\n").filter { $0.contains("not examined") }
        #expect(notes.count == 3, "\(result.err)")
        #expect(notes.contains { $0.contains(sandbox.path("root/locked") + ": not examined: Permission denied") }, "\(result.err)")
        #expect(notes.contains { $0.contains(shut + ": not examined: Permission denied") }, "\(result.err)")
        #expect(notes.contains { $0.contains(damaged + ": not examined: its header cannot be read") }, "\(result.err)")
        #expect(result.out.contains("3 entries not examined"), "\(result.out)")
    }

    @Test("wipe does not cross a mount point inside a root and says so")
    func wipeDoesNotCrossMountPoints() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let mountPoint = sandbox.path("root/mnt")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mounted = try runProcess("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mountPoint],
                                     stdin: Data(), environment: sandbox.environment)
        try #require(mounted.status == 0, "mount tmpfs: \(mounted.err)")
        defer { _ = try? runProcess("/usr/bin/umount", ["-l", mountPoint], stdin: Data(), environment: sandbox.environment) }
        let onOtherFS = try managedFile(sandbox, "root/mnt/other.txt", "other filesystem\n")
        let here = try managedFile(sandbox, "root/here.txt", "here\n")
        let result = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path("root")])
        #expect(result.status == 0, "\(result.err)")
        #expect(!sandbox.exists(here))
        #expect(sandbox.exists(onOtherFS), "the wipe crossed into another filesystem")
        #expect(result.err.contains("mount point"), "\(result.err)")
    }

    @Test("wipe does not cross a bind mount of the same filesystem inside a root")
    func wipeDoesNotCrossBindMounts() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let victim = try managedFile(sandbox, "outside/victim.txt", "root only\n")
        let mountPoint = sandbox.path("root/bind")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mounted = try runProcess("/usr/bin/mount", ["--bind", sandbox.path("outside"), mountPoint],
                                     stdin: Data(), environment: sandbox.environment)
        try #require(mounted.status == 0, "mount --bind: \(mounted.err)")
        defer { _ = try? runProcess("/usr/bin/umount", ["-l", mountPoint], stdin: Data(), environment: sandbox.environment) }
        let here = try managedFile(sandbox, "root/here.txt", "here\n")
        let result = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path("root")])
        #expect(result.status == 0, "\(result.err)")
        #expect(!sandbox.exists(here))
        #expect(sandbox.exists(victim), "the wipe crossed a bind mount")
        #expect(result.err.contains("mount point"), "\(result.err)")
    }

    @Test("wipe empties .mamfs-provider/tmp under a root and keeps the provider's other files")
    func wipeRemovesProviderTemporaries() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let leftover = try sandbox.write("root/.mamfs-provider/tmp/upload-1234", "PLAINTEXT-MARKER leftover\n")
        let nested = try sandbox.write("root/.mamfs-provider/tmp/dir/part", "PLAINTEXT-MARKER nested\n")
        let kept = try sandbox.write("root/.mamfs-provider/items.db", "provider state\n")
        let result = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path("root")])
        #expect(result.status == 0, "\(result.err)")
        #expect(!sandbox.exists(leftover))
        #expect(!sandbox.exists(nested))
        #expect(sandbox.exists(sandbox.path("root/.mamfs-provider/tmp")))
        #expect(sandbox.exists(kept))
    }

    /// The hex of every wrapped key in the state database.
    func wrappedKeys(_ sandbox: Sandbox) throws -> [Data] {
        let result = try runProcess("/usr/bin/sqlite3", [sandbox.state + "/state.db", "SELECT hex(wrapped_key) FROM account_keys"],
                                    stdin: Data(), environment: sandbox.environment)
        return result.out.split(separator: "\n").compactMap { Data(hexString: String($0)) }
    }

    func stateBytes(_ sandbox: Sandbox) -> [Data] {
        ["state.db", "state.db-wal"].compactMap { FileManager.default.contents(atPath: sandbox.state + "/" + $0) }
    }

    @Test("wipe while another connection holds a read transaction fails until the key bytes are really gone")
    func wipeWithReaderVerifiesKeyBytesAreGone() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let keys = try wrappedKeys(sandbox)
        try #require(!keys.isEmpty)
        #expect(stateBytes(sandbox).contains { bytes in keys.contains { bytes.range(of: $0) != nil } })

        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        reader.arguments = ["-c", """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN")
            c.execute("SELECT count(*) FROM account_keys").fetchall()
            print("ready", flush=True)
            sys.stdin.read()
            """, sandbox.state + "/state.db"]
        let toReader = Pipe()
        let fromReader = Pipe()
        reader.standardInput = toReader
        reader.standardOutput = fromReader
        try reader.run()
        defer {
            if reader.isRunning { reader.terminate() }
            reader.waitUntilExit()
        }
        let ready = fromReader.fileHandleForReading.availableData
        try #require(String(decoding: ready, as: UTF8.self).contains("ready"))

        let first = try sandbox.run(["wipe", Fixtures.account])
        let stillThere = stateBytes(sandbox).contains { bytes in keys.contains { bytes.range(of: $0) != nil } }
        if first.status == 0 {
            #expect(!stillThere, "wipe reported success while the key bytes remain")
        } else {
            #expect(first.err.contains("may remain"), "\(first.err)")
            #expect(first.err.contains("mamfs processes"), "\(first.err)")
        }
        try toReader.fileHandleForWriting.close()
        reader.waitUntilExit()

        let second = try sandbox.run(["wipe", Fixtures.account])
        #expect(second.status == 0, "\(second.err)")
        for bytes in stateBytes(sandbox) {
            for key in keys { #expect(bytes.range(of: key) == nil, "a wrapped key is still in the state files") }
        }
    }
}

extension Data {
    /// Bytes from an even-length hex string; nil for anything else.
    init?(hexString: String) {
        let digits = Array(hexString.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = Self.hexValue(digits[index]), let low = Self.hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
