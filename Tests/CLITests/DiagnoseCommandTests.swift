import Foundation
import Testing
import MAMTestSupport

private func jsonObject(_ result: ProcessResult) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any] else {
        throw SandboxError.failed("JSON object expected", result)
    }
    return object
}

@Suite("CLI: config get, diagnose and scrub")
struct DiagnoseCommandTests {
    @Test("config get prints all pairs, one value, JSON; a missing name exits 66, an unenrolled account 77")
    func configGet() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", #"{"appConfig": {"theme": "dark", "Portal": "https://contoso.com/x"}}"#)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy]).status == 0)

        let all = try sandbox.run(["config", "get", Fixtures.upn])
        #expect(all.status == 0, "\(all.err)")
        #expect(all.out == "Portal=https://contoso.com/x\ntheme=dark\n")
        let one = try sandbox.run(["config", "get", Fixtures.account, "theme"])
        #expect(one.out == "dark\n")
        let json = try sandbox.run(["config", "get", Fixtures.upn, "--json"])
        #expect((try jsonObject(json) as? [String: String]) == ["theme": "dark", "Portal": "https://contoso.com/x"])
        let oneJSON = try sandbox.run(["config", "get", Fixtures.upn, "Portal", "--json"])
        #expect((try jsonObject(oneJSON) as? [String: String]) == ["Portal": "https://contoso.com/x"])

        let missing = try sandbox.run(["config", "get", Fixtures.upn, "Theme"])
        #expect(missing.status == 66)
        #expect(missing.errLines == ["mamfs: config get: \(Fixtures.upn): no app configuration setting 'Theme'"])
        #expect(try sandbox.run(["unenroll", Fixtures.upn]).status == 0)
        #expect(try sandbox.run(["config", "get", Fixtures.upn]).status == 77)
        #expect(try sandbox.run(["config", "get"]).status == 64)
    }

    @Test("diagnose shows each account's last compliance result: null before a check, then its status and time")
    func diagnoseCompliance() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", #"{"compliance": [{"check": "command", "command": ["/bin/false"]}]}"#)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy]).status == 0)
        func account() throws -> [String: Any]? {
            let result = try sandbox.run(["diagnose", "--json"])
            #expect(result.status == 0, "\(result.err)")
            return (try jsonObject(result)["accounts"] as? [[String: Any]])?.first
        }
        #expect(try account()?["compliance"] is NSNull)
        #expect((try account()?["policy"] as? [String: Any])?["complianceChecks"] as? Int == 1)
        #expect(try sandbox.run(["compliance", "check", Fixtures.upn]).status == 80)
        let compliance = try account()?["compliance"] as? [String: Any]
        #expect(compliance?["status"] as? String == "NotCompliant")
        #expect((compliance?["checkedAt"] as? String)?.hasSuffix("Z") == true)
        #expect(compliance?["failedCheck"] as? String != nil)
        let text = try sandbox.run(["diagnose"])
        #expect(text.out.contains("status: NotCompliant"), "\(text.out)")
    }

    @Test("diagnose --json has every section; state checks, accounts and audit records; no key bytes appear")
    func diagnoseShape() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("work/a.txt", "alpha\n")
        #expect(try sandbox.run(["protect", file, "--account", Fixtures.upn]).status == 0)
        let result = try sandbox.run(["diagnose", "--json"])
        #expect(result.status == 0, "\(result.err)")
        let report = try jsonObject(result)
        #expect(Set(report.keys) == ["versions", "state", "mounts", "accounts", "allowedAccounts", "audit"])
        let versions = report["versions"] as? [String: Any]
        #expect(versions?["mamfs"] as? String != nil)
        #expect((versions?["sqlite"] as? String)?.hasPrefix("3.") == true)
        #expect((versions?["openssl"] as? String)?.contains("OpenSSL") == true)
        #expect((versions?["libfuse"] as? String)?.hasPrefix("3.") == true)
        #expect((versions?["libcurl"] as? String)?.first?.isNumber == true)
        #expect((versions?["libxml2"] as? String).flatMap { Int($0) }.map { $0 >= 20900 } == true)
        let state = report["state"] as? [String: Any]
        #expect(state?["integrityCheck"] as? String == "ok")
        #expect((state?["directory"] as? [String: Any])?["mode"] as? String == "0700")
        #expect((state?["directory"] as? [String: Any])?["private"] as? Bool == true)
        let files = state?["files"] as? [[String: Any]] ?? []
        let masterKeyFile = files.first { $0["name"] as? String == "master.key" }
        #expect(masterKeyFile?["mode"] as? String == "0600")
        #expect((state?["masterKey"] as? [String: Any])?["kind"] as? String == "keyfile")
        #expect((state?["accountKeys"] as? [String: Int]) == [Fixtures.account: 1])
        #expect(report["mounts"] is [Any])
        let accounts = report["accounts"] as? [[String: Any]] ?? []
        #expect(accounts.count == 1)
        let policy = accounts.first?["policy"] as? [String: Any]
        #expect(policy?["fileEncryptionRequired"] as? Bool == true)
        #expect(policy?["receiveData"] as? String == "managedOnly")
        let audit = report["audit"] as? [[String: Any]] ?? []
        #expect(audit.map { $0["action"] as? String ?? "" } == ["enroll", "protect"])

        // The key file's bytes, in any common spelling, are nowhere in the report.
        let key = try sandbox.read(sandbox.state + "/master.key")
        let spellings = [key.base64EncodedString(), key.map { String(format: "%02x", $0) }.joined(), String(decoding: key, as: UTF8.self)]
        let text = try sandbox.run(["diagnose"])
        #expect(text.status == 0)
        for spelling in spellings where spelling.count >= 16 {
            #expect(!result.out.contains(spelling))
            #expect(!text.out.contains(spelling))
        }
        #expect(text.out.contains("integrityCheck: ok"))
    }

    @Test("diagnose shows a running mount with its options", .enabled(if: fuseUsable))
    func diagnoseMount() throws {
        let (sandbox, backing, mountpoint) = try MountTests.mountSandbox()
        defer { MountTests.forceUnmount(mountpoint) }
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        let report = try jsonObject(try sandbox.run(["diagnose", "--json"]))
        let mounts = report["mounts"] as? [[String: Any]] ?? []
        let ours = mounts.first { $0["mountPoint"] as? String == mountpoint }
        #expect(ours != nil, "\(mounts)")
        #expect((ours?["options"] as? String)?.hasPrefix("rw") == true)
        #expect((ours?["superOptions"] as? String)?.contains("user_id=") == true)
        #expect(ours?["source"] as? String != nil)
        let unmount = try sandbox.run(["unmount", mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
    }

    @Test("a scrubbed UPN and path appear nowhere in diagnose (text and JSON); scrub shows and clears the list")
    func scrubbed() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let secretDirectory = sandbox.path("Project-Falcon")
        let file = try sandbox.write("Project-Falcon/plan.txt", "plan\n")
        #expect(try sandbox.run(["protect", file, "--account", Fixtures.upn]).status == 0)
        #expect(try sandbox.run(["accounts", "allow", Fixtures.upn]).status == 0)
        let before = try sandbox.run(["diagnose", "--json"])
        #expect(before.out.contains(Fixtures.upn), "the UPN shows while not scrubbed")
        #expect(before.out.contains("Project-Falcon"))

        let set = try sandbox.run(["scrub", Fixtures.upn.uppercased(), "project-falcon"])
        #expect(set.status == 0, "\(set.err)")
        #expect(try sandbox.run(["scrub"]).out == "\(Fixtures.upn.uppercased())\nproject-falcon\n")
        for arguments in [["diagnose", "--json"], ["diagnose"]] {
            let result = try sandbox.run(arguments)
            #expect(result.status == 0, "\(result.err)")
            #expect(!result.out.lowercased().contains(Fixtures.upn), "\(arguments)")
            #expect(!result.out.lowercased().contains("project-falcon"), "\(arguments)")
            #expect(!result.out.contains(secretDirectory))
            #expect(result.out.contains("[scrubbed]"))
        }
        #expect(try sandbox.run(["scrub", "--clear"]).status == 0)
        #expect(try sandbox.run(["scrub", "--json"]).out.contains("\"scrub\" : [\n\n  ]") || (try jsonObject(try sandbox.run(["scrub", "--json"])) as? [String: [String]]) == ["scrub": []])
        #expect(try sandbox.run(["diagnose", "--json"]).out.contains(Fixtures.upn))
    }
}
