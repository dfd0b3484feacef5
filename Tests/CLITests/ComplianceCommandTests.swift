import Foundation
import MAMProtection
import MAMTestSupport
import Testing

/// App Protection Conditional Access through the CLI: the compliance verbs, their exit codes,
/// and the gate on the account's keys (encrypt, decrypt, mount).
@Suite("CLI: compliance")
struct ComplianceCommandTests {
    /// A sandbox with the demo account enrolled under a policy with `compliance` and the given
    /// extra keys; `script` (shell text) is the command check's program, at `ROOT/check.sh`.
    static func sandbox(checks: String? = nil, script: String = "echo fine; exit 0", extra: String = "") throws -> Sandbox {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        try setScript(sandbox, "check.sh", script)
        let list = checks ?? "[{\"check\": \"command\", \"command\": [\"\(sandbox.path("check.sh"))\"], \"timeoutSeconds\": 5}]"
        let policy = try sandbox.write("policy.json", "{\"fileEncryptionRequired\": true, \"compliance\": \(list)\(extra)}")
        let enroll = try sandbox.run(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy])
        #expect(enroll.status == 0, "\(enroll.err)")
        return sandbox
    }

    static func setScript(_ sandbox: Sandbox, _ name: String, _ body: String) throws {
        try writeExecutable(sandbox.path(name), "#!/bin/sh\n\(body)\n")
    }

    @Test("each status of a command check has its exit code and is recorded: 0 Compliant, 1 NotCompliant, 2-5 the others, any other status and a timeout ServiceFailure; stdout's first line is the reason")
    func exitCodesPerStatus() throws {
        let sandbox = try Self.sandbox()
        let cases: [(String, Int32, String, String)] = [
            ("echo 'agent running'; exit 0", 0, "Compliant", "1 check passed"),
            ("echo 'agent stopped'; echo second line; exit 1", 80, "NotCompliant", "agent stopped"),
            ("echo 'no route to the service'; exit 2", 81, "NetworkFailure", "no route to the service"),
            ("echo 'service said 500'; exit 3", 82, "ServiceFailure", "service said 500"),
            ("echo 'user pressed cancel'; exit 4", 83, "UserCancelled", "user pressed cancel"),
            ("echo 'sign in first'; exit 5", 84, "InteractionRequired", "sign in first"),
            ("echo 'odd'; exit 9", 82, "ServiceFailure", "odd"),
            ("echo 'slow'; sleep 30", 82, "ServiceFailure", "timed out after 5 s: slow"),
        ]
        for (script, code, status, reason) in cases {
            try Self.setScript(sandbox, "check.sh", script)
            let run = try sandbox.run(["compliance", "check", Fixtures.upn])
            #expect(run.status == code, "\(script): \(run.out) \(run.err)")
            let shown = try sandbox.run(["compliance", "status", Fixtures.account, "--json"])
            #expect(shown.status == code)
            let object = try JSONSerialization.jsonObject(with: shown.stdout) as? [String: Any]
            #expect(object?["status"] as? String == status, "\(script)")
            #expect((object?["reason"] as? String)?.hasSuffix(reason) == true, "\(script): \(object?["reason"] ?? "")")
            #expect(object?["failedCheck"] is NSNull == (status == "Compliant"))
        }
        // The audit log holds every result, the chain intact.
        let audit = try sandbox.run(["audit", "--json"])
        #expect(audit.out.components(separatedBy: "\"compliance check\"").count - 1 == cases.count)
        #expect(try sandbox.run(["audit", "verify"]).status == 0)
    }

    @Test("status of an account never checked exits 66; the compliance verbs refuse a policy without checks (64)")
    func neverChecked() throws {
        let sandbox = try Self.sandbox()
        let status = try sandbox.run(["compliance", "status", Fixtures.upn])
        #expect(status.status == 66)
        #expect(status.out == "\(Fixtures.upn): compliance never checked\n")
        let plain = try Sandbox()
        try plain.initAndEnroll()
        let check = try plain.run(["compliance", "check", Fixtures.upn])
        #expect(check.status == 64)
        #expect(check.err.contains("has no 'compliance' checks"))
    }

    @Test("the gate: encrypt and decrypt are refused (77, the reason, an audit record) until a Compliant check, allowed after it, refused again after complianceMaxAge and after a NotCompliant check")
    func gateOnEncryptAndDecrypt() throws {
        let sandbox = try Self.sandbox(script: "echo 'agent running'; exit 0", extra: ", \"complianceMaxAge\": \"2s\"")
        let file = try sandbox.write("doc.txt", "work text\n")
        let never = try sandbox.run(["encrypt", file, "--account", Fixtures.upn])
        #expect(never.status == 77)
        #expect(never.errLines == ["mamfs: encrypt: \(file): denied by policy: account \(Fixtures.upn): compliance never checked (run 'mamfs compliance check \(Fixtures.upn)')"])
        #expect(try sandbox.read(file) == Data("work text\n".utf8), "nothing written")

        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 0)
        let encrypt = try sandbox.run(["encrypt", file, "--account", Fixtures.upn])
        #expect(encrypt.status == 0, "\(encrypt.err)")
        #expect(!(try sandbox.read(file).contains("work text")))
        let copy = sandbox.path("copy.txt")
        let decrypt = try sandbox.run(["decrypt", file, "-o", copy])
        #expect(decrypt.status == 0, "\(decrypt.err)")
        #expect(try sandbox.read(copy) == Data("work text\n".utf8))

        sleep(3)
        let expired = try sandbox.run(["decrypt", file, "-o", sandbox.path("late.txt")])
        #expect(expired.status == 77)
        #expect(expired.err.contains("compliance result older than complianceMaxAge (2 s)"), "\(expired.err)")
        #expect(!sandbox.exists(sandbox.path("late.txt")))

        try Self.setScript(sandbox, "check.sh", "echo 'agent stopped'; exit 1")
        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 80)
        let refused = try sandbox.run(["decrypt", file, "-o", "-"])
        #expect(refused.status == 77)
        #expect(refused.stdout.isEmpty)
        #expect(refused.errLines == ["mamfs: decrypt: \(file): denied by policy: account \(Fixtures.upn): not compliant: command \(sandbox.path("check.sh")): agent stopped"])
        let refusals = try jsonArray(try sandbox.run(["audit", "--json"])).filter { $0["action"] as? String == "unwrap-key" }
        #expect(refusals.map { $0["rule"] as? String } == ["compliance=never-checked", "compliance=expired", "compliance=NotCompliant"])
        #expect(refusals.allSatisfy { $0["decision"] as? String == "denied" && $0["owner"] as? String == Fixtures.account })
    }

    @Test("remediate runs the failing check's program and checks again (Compliant, 0); --silent answers InteractionRequired (84) for a check that needs the user without running it; a remediation that exits 4 gives UserCancelled (83)")
    func remediate() throws {
        let marker = "fixed"
        let sandbox = try Self.sandbox()
        try Self.setScript(sandbox, "check.sh", "if [ -e \"$(dirname \"$0\")/\(marker)\" ]; then echo ok; exit 0; fi; echo 'not fixed'; exit 1")
        try Self.setScript(sandbox, "fix.sh", "touch \"$(dirname \"$0\")/\(marker)\"; echo fixed it")
        try Self.setScript(sandbox, "cancel.sh", "echo 'the user said no'; exit 4")
        func policy(_ remediate: String, needsUser: Bool) throws {
            let text = "{\"compliance\": [{\"check\": \"command\", \"command\": [\"\(sandbox.path("check.sh"))\"], \"remediate\": [\"\(sandbox.path(remediate))\"], \"remediateNeedsUser\": \(needsUser)}]}"
            #expect(try sandbox.run(["policy", "set", Fixtures.upn, try sandbox.write("p.json", text)]).status == 0)
        }
        try policy("fix.sh", needsUser: true)
        let silent = try sandbox.run(["compliance", "remediate", Fixtures.upn, "--silent", "--json"])
        #expect(silent.status == 84, "\(silent.out) \(silent.err)")
        #expect(!sandbox.exists(sandbox.path(marker)), "a remediation that needs the user is not run with --silent")
        let silentObject = try JSONSerialization.jsonObject(with: silent.stdout) as? [String: Any]
        #expect(silentObject?["status"] as? String == "InteractionRequired")

        try policy("cancel.sh", needsUser: false)
        let cancelled = try sandbox.run(["compliance", "remediate", Fixtures.upn])
        #expect(cancelled.status == 83, "\(cancelled.out)")
        #expect(cancelled.out.contains("UserCancelled (command \(sandbox.path("check.sh")): the user said no)"))

        try policy("fix.sh", needsUser: true)
        let fixed = try sandbox.run(["compliance", "remediate", Fixtures.upn])
        #expect(fixed.status == 0, "\(fixed.out) \(fixed.err)")
        #expect(sandbox.exists(sandbox.path(marker)))
        #expect(fixed.out.contains("remediate command \(sandbox.path("check.sh")): Compliant: fixed it"))
        #expect(try sandbox.run(["compliance", "status", Fixtures.upn]).status == 0)
    }

    @Test("encryptedBackingDevice: a directory on tmpfs and one on this machine's disk are NotCompliant with the reason; the gate refuses a file there even after another directory was checked")
    func encryptedBackingDevice() throws {
        let shm = try TempDirectory(prefix: "mamfs-cli-shm")
        let onTmpfs = shm.path.replacingOccurrences(of: "/tmp/", with: "/dev/shm/")
        try FileManager.default.createDirectory(atPath: onTmpfs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: onTmpfs) }
        let sandbox = try Self.sandbox(checks: "[{\"check\": \"encryptedBackingDevice\"}]")
        let none = try sandbox.run(["compliance", "check", Fixtures.upn])
        #expect(none.status == 80)
        #expect(none.out.contains("no backing directory to check"))
        let tmpfs = try sandbox.run(["compliance", "check", Fixtures.upn, "--path", onTmpfs])
        #expect(tmpfs.status == 80)
        #expect(tmpfs.out.contains("encryptedBackingDevice: NotCompliant: \(onTmpfs) is on tmpfs, which has no block device (not a dm-crypt device)"), "\(tmpfs.out)")
        let disk = try sandbox.run(["compliance", "check", Fixtures.upn, "--path", sandbox.root])
        #expect(disk.status == 80)
        let type = try runProcess("/usr/bin/findmnt", ["-n", "-o", "FSTYPE", "-T", sandbox.root],
                                  environment: ProcessInfo.processInfo.environment).out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(disk.out.contains("\(sandbox.root) is on \(type) on "), "\(disk.out)")
        #expect(disk.out.contains("not a dm-crypt device"))
        let file = try sandbox.write("doc.txt", "work\n")
        let refused = try sandbox.run(["encrypt", file, "--account", Fixtures.upn])
        #expect(refused.status == 77)
        #expect(refused.err.contains("not compliant: encryptedBackingDevice: \(sandbox.root) is on \(type)"), "\(refused.err)")
    }

    @Test("wipeOnNonCompliance: a NotCompliant result wipes the account (its files gone, a copy unreadable) and says so")
    func wipeOnNonCompliance() throws {
        let sandbox = try Self.sandbox(script: "echo ok; exit 0", extra: ", \"wipeOnNonCompliance\": true")
        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 0)
        let file = try sandbox.write("work/report.txt", "corporate report\n")
        let personal = try sandbox.write("work/holiday.txt", "personal\n")
        #expect(try sandbox.run(["protect", file, "--account", Fixtures.account]).status == 0)
        let outside = sandbox.path("report-copy.txt")
        try FileManager.default.copyItem(atPath: file, toPath: outside)

        try Self.setScript(sandbox, "check.sh", "echo 'disk encryption off'; exit 1")
        let check = try sandbox.run(["compliance", "check", Fixtures.upn])
        #expect(check.status == 80)
        #expect(check.out.contains("wipeOnNonCompliance: selective wipe of \(Fixtures.account): removed 1 file, destroyed 1 key"), "\(check.out)")
        #expect(!sandbox.exists(file))
        #expect(try sandbox.read(personal) == Data("personal\n".utf8))
        let decrypt = try sandbox.run(["decrypt", outside, "-o", sandbox.path("recovered")])
        #expect(decrypt.status == 77)
        #expect(decrypt.err.contains("key unavailable"))
        #expect(!sandbox.exists(sandbox.path("recovered")))
        let wipes = try jsonArray(try sandbox.run(["audit", "--json"])).filter { $0["action"] as? String == "wipe" }
        #expect(wipes.map { $0["rule"] as? String } == ["wipeOnNonCompliance"])
    }

    @Test("the gate refuses mount --account (77, the reason) until a Compliant check; a running mount's next unwrap after a NotCompliant check is refused (EACCES)",
          .enabled(if: fuseUsable))
    func gateOnMount() throws {
        let sandbox = try Self.sandbox()
        let backing = sandbox.path("backing")
        let mountpoint = sandbox.path("mnt")
        for directory in [backing, mountpoint] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        defer { FuseMounts.tearDown(mountpoint) }
        let refused = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(refused.status == 77)
        #expect(refused.err.contains("compliance never checked"), "\(refused.err)")
        #expect(!FuseMounts.isMounted(mountpoint))

        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 0)
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        try Data("work text\n".utf8).write(to: URL(fileURLWithPath: mountpoint + "/a.txt"))
        #expect(try sandbox.read(mountpoint + "/a.txt") == Data("work text\n".utf8))
        #expect(!(try sandbox.read(backing + "/a.txt").contains("work text")))

        try Self.setScript(sandbox, "check.sh", "echo 'agent stopped'; exit 1")
        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 80)
        let cat = try runProcess("/bin/cat", [mountpoint + "/a.txt"], environment: ProcessInfo.processInfo.environment)
        #expect(cat.status == 1)
        #expect(cat.err.contains("Permission denied"), "\(cat.err)")
        #expect(cat.stdout.isEmpty)
        #expect(try sandbox.run(["unmount", mountpoint]).status == 0)
    }

    @Test("the gate refuses mount --account again once the Compliant result is older than complianceMaxAge (77, the reason)",
          .enabled(if: fuseUsable))
    func mountAfterMaxAge() throws {
        let sandbox = try Self.sandbox(extra: ", \"complianceMaxAge\": 2")
        let backing = sandbox.path("backing")
        let mountpoint = sandbox.path("mnt")
        for directory in [backing, mountpoint] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        defer { FuseMounts.tearDown(mountpoint) }
        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 0)
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 0, "\(mount.err)")
        #expect(try sandbox.run(["unmount", mountpoint]).status == 0)
        sleep(3)
        let late = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(late.status == 77)
        #expect(late.err.contains("compliance result older than complianceMaxAge (2 s)"), "\(late.err)")
        #expect(!FuseMounts.isMounted(mountpoint))
    }

    @Test("encryptedBackingDevice on a mount: a backing directory on tmpfs is refused (77) naming tmpfs, although the other checks pass",
          .enabled(if: fuseUsable))
    func mountOnTmpfsBacking() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        try Self.setScript(sandbox, "check.sh", "echo fine")
        let policy = try sandbox.write("p.json", """
            {"compliance": [{"check": "command", "command": ["\(sandbox.path("check.sh"))"]}, {"check": "encryptedBackingDevice"}]}
            """)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy]).status == 0)
        let backing = "/dev/shm/mamfs-cli-backing-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: backing) }
        let mountpoint = sandbox.path("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        defer { FuseMounts.tearDown(mountpoint) }
        let check = try sandbox.run(["compliance", "check", Fixtures.upn, "--path", backing])
        #expect(check.status == 80)
        #expect(check.out.contains("command \(sandbox.path("check.sh")): Compliant: fine\n"), "\(check.out)")
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 77)
        #expect(mount.err.contains("not compliant: encryptedBackingDevice: \(backing) is on tmpfs, which has no block device (not a dm-crypt device)"),
                "\(mount.err)")
        #expect(!FuseMounts.isMounted(mountpoint))
    }

    @Test("the gate covers the providers: a sync pass and an import need the account's key, refused (77, the reason) while not compliant, nothing uploaded")
    func providers() throws {
        let sandbox = try Self.sandbox(script: "echo fine; exit 0")
        let remote = sandbox.path("remote")
        let local = sandbox.path("local")
        try sandbox.write("remote/a.txt", "alpha\n")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        let early = try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn])
        #expect(early.status == 77, "\(early.err)")
        #expect(early.err.contains("compliance never checked"), "\(early.err)")

        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 0)
        let sync = try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn])
        #expect(sync.status == 0, "\(sync.err)")
        let source = try sandbox.write("outside/report.txt", "quarterly numbers\n")
        #expect(try sandbox.run(["encrypt", source, "--account", Fixtures.upn]).status == 0)

        try Self.setScript(sandbox, "check.sh", "echo 'agent stopped'; exit 1")
        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 80)
        let refused = try sandbox.run(["provider", "import", source, "--to", local])
        #expect(refused.status == 77)
        #expect(refused.err.contains("not compliant: command \(sandbox.path("check.sh")): agent stopped"), "\(refused.err)")
        #expect(!sandbox.exists(remote + "/report.txt"))
    }
}
