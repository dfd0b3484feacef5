import Foundation
import MAMTestSupport
import Testing
@testable import MAMProtection

/// Each compliance check against this machine's real sources, and the branches it lacks
/// through sources a unit test may point elsewhere.
@Suite("Compliance checks")
struct ComplianceCheckTests {
    static func script(_ directory: TempDirectory, _ name: String, _ body: String) throws -> String {
        let path = directory.file(name)
        try writeExecutable(path, "#!/bin/sh\n\(body)\n")
        return path
    }

    @Test("command: the exit status decides, stdout's first line is the reason; a timeout kills the program and what it started (ServiceFailure)")
    func command() throws {
        let dir = try TempDirectory(prefix: "mamfs-compliance")
        let cases: [(String, ComplianceStatus, String)] = [
            ("printf 'all good\\nmore\\n'; exit 0", .compliant, "all good"),
            ("echo '  padded  '; exit 1", .notCompliant, "padded"),
            ("exit 2", .networkFailure, "\(dir.file("c.sh")) exited 2"),
            ("echo x >&2; exit 3", .serviceFailure, "\(dir.file("c.sh")) exited 3"),
            ("echo cancelled; exit 4", .userCancelled, "cancelled"),
            ("echo interact; exit 5", .interactionRequired, "interact"),
            ("echo weird; exit 42", .serviceFailure, "weird"),
            ("kill -TERM $$; sleep 5", .serviceFailure, "\(dir.file("c.sh")) was killed by signal 15"),
        ]
        for (body, status, reason) in cases {
            let path = try Self.script(dir, "c.sh", body)
            let outcome = ComplianceEvaluator.runProgram([path], timeout: 5, check: "command \(path)")
            #expect(outcome == ComplianceOutcome(check: "command \(path)", status: status, reason: reason), "\(body)")
        }
        let pidFile = dir.file("child.pid")
        let slow = try Self.script(dir, "slow.sh", "sleep 60 & echo $! > \(pidFile); echo started; wait")
        let started = Date()
        let outcome = ComplianceEvaluator.runProgram([slow], timeout: 0.5, check: "command \(slow)")
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(outcome.status == .serviceFailure)
        #expect(outcome.reason == "\(slow) timed out after 0.5 s: started")
        let child = try #require(Int32(String(decoding: try Data(contentsOf: URL(fileURLWithPath: pidFile)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        usleep(200_000)
        // Gone, or a zombie its new parent has not reaped yet: either way no longer running.
        let stat = (try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8)) ?? ""
        let state = stat.split(separator: ")").last?.split(separator: " ").first.map(String.init)
        #expect(stat.isEmpty || state == "Z", "the program's child was killed with it: \(stat)")

        let missing = ComplianceEvaluator.runProgram([dir.file("absent")], timeout: 1, check: "x")
        #expect(missing == ComplianceOutcome(check: "x", status: .serviceFailure,
                                             reason: "cannot run \(dir.file("absent")): \(String(cString: strerror(ENOENT)))"))
    }

    @Test("packagesUpdatedWithinDays: the newest of apt's evidence on this machine decides")
    func packagesOnThisMachine() throws {
        let sources = PackageUpdateCheck.Sources()
        var newest: Date?
        for path in [sources.updateStamp, sources.dpkgStatus] {
            var st = stat()
            if stat(path, &st) == 0 {
                let date = Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
                newest = max(newest ?? date, date)
            }
        }
        let evaluated = PackageUpdateCheck.newestEvidence(sources)
        try #require(newest != nil || evaluated != nil, "this machine has no apt evidence at all")
        if let newest { #expect(evaluated!.0 >= newest, "never older than the mtimes stat sees") }
        let ageDays = Date().timeIntervalSince(evaluated!.0) / 86_400
        let fresh = PackageUpdateCheck.evaluate(days: Int(ageDays.rounded(.up)) + 1, now: Date())
        #expect(fresh.status == .compliant, "\(fresh.reason)")
        #expect(fresh.reason.contains(evaluated!.1))
        let stale = PackageUpdateCheck.evaluate(days: 0, now: evaluated!.0.addingTimeInterval(86_400 + 5))
        #expect(stale.status == .notCompliant)
        #expect(stale.reason.hasPrefix("packages last updated 1 day ago (\(evaluated!.1), "), "\(stale.reason)")
    }

    @Test("packagesUpdatedWithinDays: history.log's last Start-Date counts (local time); no evidence at all is NotCompliant")
    func packagesFromHistory() throws {
        let dir = try TempDirectory(prefix: "mamfs-compliance")
        let history = dir.file("history.log")
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd  HH:mm:ss"
        let now = Date()
        let older = formatter.string(from: now.addingTimeInterval(-40 * 86_400))
        let newer = formatter.string(from: now.addingTimeInterval(-3 * 86_400))
        try Data("Start-Date: \(older)\nCommandline: apt-get upgrade\nEnd-Date: \(older)\n\nStart-Date: \(newer)\nCommandline: apt-get install x\n".utf8)
            .write(to: URL(fileURLWithPath: history))
        let sources = PackageUpdateCheck.Sources(updateStamp: dir.file("none"), history: history, dpkgStatus: dir.file("none"))
        #expect(PackageUpdateCheck.evaluate(days: 7, now: now, sources: sources).status == .compliant)
        let late = PackageUpdateCheck.evaluate(days: 2, now: now, sources: sources)
        #expect(late.status == .notCompliant)
        #expect(late.reason.hasPrefix("packages last updated 3 days ago (\(history)"), "\(late.reason)")
        let nothing = PackageUpdateCheck.Sources(updateStamp: dir.file("a"), history: dir.file("b"), dpkgStatus: dir.file("c"))
        let none = PackageUpdateCheck.evaluate(days: 365, now: now, sources: nothing)
        #expect(none.status == .notCompliant)
        #expect(none.reason.hasPrefix("no evidence of a package update"))
    }

    @Test("screenLockEnabled: the answer gsettings gives on this machine; without gsettings it cannot determine (NotCompliant)")
    func screenLock() throws {
        let outcome = ScreenLockCheck.evaluate()
        let gsettings = ScreenLockCheck.gsettingsPaths.first { access($0, X_OK) == 0 }
        if let gsettings {
            let direct = try runProcess(gsettings, ["get", "org.gnome.desktop.screensaver", "lock-enabled"],
                                        environment: ProcessInfo.processInfo.environment)
            let answer = direct.out.trimmingCharacters(in: .whitespacesAndNewlines)
            let expected: ComplianceStatus = direct.status == 0 && answer == "true" ? .compliant : .notCompliant
            #expect(outcome.status == expected, "\(answer): \(outcome.reason)")
            if answer == "false" { #expect(outcome.reason.contains("lock-enabled is false")) }
        } else {
            #expect(outcome.reason == "cannot determine whether the screen locks: gsettings is not installed")
        }
        let absent = ScreenLockCheck.evaluate(gsettingsPaths: ["/nonexistent/gsettings"])
        #expect(absent == ComplianceOutcome(check: "screenLockEnabled", status: .notCompliant,
                                            reason: "cannot determine whether the screen locks: gsettings is not installed"))
    }

    @Test("encryptedBackingDevice: tmpfs has no block device, this machine's disk is not dm-crypt, a missing directory is named")
    func deviceNotEncrypted() throws {
        let onTmpfs = "/dev/shm/mamfs-compliance-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: onTmpfs, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: onTmpfs) }
        #expect(EncryptedDeviceCheck.evaluate(directory: onTmpfs) ==
                ComplianceOutcome(check: "encryptedBackingDevice", status: .notCompliant,
                                  reason: "\(onTmpfs) is on tmpfs, which has no block device (not a dm-crypt device)"))
        let dir = try TempDirectory(prefix: "mamfs-compliance")
        let disk = EncryptedDeviceCheck.evaluate(directory: dir.path)
        var st = stat()
        #expect(stat(dir.path, &st) == 0)
        let number = "\((st.st_dev >> 8) & 0xfff):\((st.st_dev & 0xff) | ((st.st_dev >> 12) & ~0xff))"
        let uuid = try? String(contentsOfFile: "/sys/dev/block/\(number)/dm/uuid", encoding: .utf8)
        if uuid?.hasPrefix("CRYPT-") == true {
            #expect(disk.status == .compliant)
        } else {
            #expect(disk.status == .notCompliant)
            #expect(disk.reason.hasSuffix("(\(number)), not a dm-crypt device"), "\(disk.reason)")
        }
        let gone = EncryptedDeviceCheck.evaluate(directory: dir.file("missing"))
        #expect(gone.status == .notCompliant)
        #expect(gone.reason.hasPrefix("\(dir.file("missing")): cannot open"))
    }

    /// Whether the kernel's device mapper answers here (dm-crypt needs it).
    static let deviceMapperUsable: Bool = {
        let fd = open("/dev/mapper/control", O_RDWR)
        if fd >= 0 { close(fd) }
        return fd >= 0 && access("/usr/sbin/dmsetup", X_OK) == 0 && access("/usr/sbin/losetup", X_OK) == 0
    }()

    @Test("encryptedBackingDevice: a directory on a plain dm-crypt mapping over a loop device is Compliant (skipped where the kernel has no device mapper)",
          .enabled(if: deviceMapperUsable, "the kernel's device mapper is not available here (/dev/mapper/control)"))
    func deviceOnDMCrypt() throws {
        let dir = try TempDirectory(prefix: "mamfs-dmcrypt")
        let image = dir.file("disk.img")
        let name = "mamfs-test-\(getpid())"
        let mountpoint = dir.file("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let key = (0..<64).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let setup = try shell("""
            truncate -s 32M \(image) && loop=$(losetup -f --show \(image)) && echo $loop > \(dir.file("loop")) &&
            echo "0 65536 crypt aes-xts-plain64 \(key) 0 $loop 0" | dmsetup create \(name) &&
            mkfs.ext4 -q /dev/mapper/\(name) && mount /dev/mapper/\(name) \(mountpoint)
            """, timeout: 60)
        defer {
            _ = try? shell("umount \(mountpoint); dmsetup remove \(name); losetup -d $(cat \(dir.file("loop")))", timeout: 60)
        }
        try #require(setup.status == 0, "\(setup.err)")
        let outcome = EncryptedDeviceCheck.evaluate(directory: mountpoint)
        #expect(outcome.status == .compliant, "\(outcome.reason)")
        #expect(outcome.reason.contains("encrypted by dm-crypt (\(name))"))
    }
}
