import Foundation
import Testing
import MAMTestSupport

/// A sandbox whose managed account's policy forbids user decryption at `level`, with one
/// encrypted work file.
private struct AuditSandbox {
    let sandbox: Sandbox
    let file: String
    let plaintext = "quarterly figures\n"

    init(level: String, allowUserDecrypt: Bool = false) throws {
        sandbox = try Sandbox()
        let initRun = try sandbox.run(["init"])
        guard initRun.status == 0 else { throw SandboxError.failed("init", initRun) }
        let policy = try sandbox.write("policy.json", """
            {"fileEncryptionRequired": true, "allowUserDecrypt": \(allowUserDecrypt), "protectionLevel": "\(level)"}
            """)
        let enroll = try sandbox.run(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy])
        guard enroll.status == 0 else { throw SandboxError.failed("enroll", enroll) }
        file = try sandbox.write("work/report.txt", plaintext)
        let protect = try sandbox.run(["protect", sandbox.path("work"), "-R", "--account", Fixtures.upn])
        guard protect.status == 0 else { throw SandboxError.failed("protect", protect) }
    }

    func run(_ arguments: [String]) throws -> ProcessResult { try sandbox.run(arguments) }

    /// `mamfs audit --json` (plus `extra`) parsed.
    func records(_ extra: [String] = []) throws -> [[String: Any]] {
        let result = try run(["audit", "--json"] + extra)
        #expect(result.status == 0, "\(result.err)")
        return try jsonArray(result)
    }

    func records(action: String) throws -> [[String: Any]] {
        try records().filter { $0["action"] as? String == action }
    }

    var logPath: String { sandbox.state + "/audit.log" }

    func logLines() throws -> [String] {
        String(decoding: try sandbox.read(logPath), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func writeLog(_ lines: [String]) throws {
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: logPath))
    }
}

private func info(_ sandbox: AuditSandbox, _ path: String) throws -> [String: Any] {
    try jsonArray(try sandbox.run(["info", "--json", path])).first ?? [:]
}

@Suite("CLI: the audit log and the allowUserDecrypt rule")
struct AuditCommandTests {
    @Test("decrypt -o of a work file with allowUserDecrypt false: 77 naming the rule and the path, no output, one denied record")
    func decryptCopyDenied() throws {
        let s = try AuditSandbox(level: "block")
        let before = try s.sandbox.read(s.file)
        let copy = s.sandbox.path("copy.txt")
        let result = try s.run(["decrypt", s.file, "-o", copy])
        #expect(result.status == 77)
        #expect(result.errLines == ["mamfs: decrypt: \(s.file): denied by policy (allowUserDecrypt=false): the owner's data may not be made personal; nothing was changed"])
        #expect(!FileManager.default.fileExists(atPath: copy), "the output is not created")
        #expect(try s.sandbox.read(s.file) == before)
        let denied = try s.records(action: "decrypt")
        #expect(denied.count == 1)
        #expect(denied.first?["decision"] as? String == "denied")
        #expect(denied.first?["rule"] as? String == "allowUserDecrypt=false")
        #expect(denied.first?["path"] as? String == s.file)
        #expect(denied.first?["owner"] as? String == Fixtures.account)
        #expect((denied.first?["count"] as? NSNumber)?.intValue == 1)
    }

    @Test("decrypt in place and to stdout are denied the same way and change nothing")
    func decryptInPlaceAndStdoutDenied() throws {
        let s = try AuditSandbox(level: "block")
        let before = try s.sandbox.read(s.file)
        let inPlace = try s.run(["decrypt", s.file])
        #expect(inPlace.status == 77)
        #expect(inPlace.err.contains("allowUserDecrypt=false") && inPlace.err.contains(s.file))
        let stdout = try s.run(["decrypt", s.file, "-o", "-"])
        #expect(stdout.status == 77)
        #expect(stdout.stdout.isEmpty)
        #expect(try s.sandbox.read(s.file) == before)
        #expect(try info(s, s.file)["encrypted"] as? Bool == true)
        #expect(try s.records(action: "decrypt").map { $0["decision"] as? String } == ["denied", "denied"])
    }

    @Test("unprotect-data of a work file's bytes or of a protected buffer with allowUserDecrypt false: 77, no output, a denied record of '-'")
    func unprotectDataDenied() throws {
        let s = try AuditSandbox(level: "block")
        let buffer = try s.sandbox.run(["protect-data", "--account", Fixtures.account], stdin: Data(s.plaintext.utf8))
        #expect(buffer.status == 0, "\(buffer.err)")
        for input in [try s.sandbox.read(s.file), buffer.stdout] {
            let result = try s.sandbox.run(["unprotect-data"], stdin: input)
            #expect(result.status == 77, "\(result.err)")
            #expect(result.stdout.isEmpty)
            #expect(result.errLines == ["mamfs: unprotect-data: stdin: denied by policy (allowUserDecrypt=false): the owner's data may not be made personal; nothing was changed"])
        }
        let denied = try s.records(action: "unprotect-data")
        #expect(denied.map { $0["decision"] as? String } == ["denied", "denied"])
        #expect(denied.allSatisfy { $0["path"] as? String == "-" && $0["owner"] as? String == Fixtures.account })
        #expect(denied.allSatisfy { $0["rule"] as? String == "allowUserDecrypt=false" })
    }

    @Test("unprotect-data at level audit writes the plaintext and records it audited; allowed, it records it allowed; unmanaged data records nothing")
    func unprotectDataRecorded() throws {
        let audit = try AuditSandbox(level: "audit")
        let audited = try audit.sandbox.run(["unprotect-data"], stdin: try audit.sandbox.read(audit.file))
        #expect(audited.status == 0, "\(audited.err)")
        #expect(String(decoding: audited.stdout, as: UTF8.self) == audit.plaintext)
        #expect(try audit.records(action: "unprotect-data").map { $0["decision"] as? String } == ["audited"])
        let allowed = try AuditSandbox(level: "block", allowUserDecrypt: true)
        let plain = try allowed.sandbox.run(["unprotect-data"], stdin: try allowed.sandbox.read(allowed.file))
        #expect(plain.status == 0, "\(plain.err)")
        #expect(String(decoding: plain.stdout, as: UTF8.self) == allowed.plaintext)
        let records = try allowed.records(action: "unprotect-data")
        #expect(records.map { $0["decision"] as? String } == ["allowed"])
        #expect(records.first?["path"] as? String == "-")
        let personal = try allowed.sandbox.run(["protect-data", "--account", ""], stdin: Data("mine\n".utf8))
        let mine = try allowed.sandbox.run(["unprotect-data"], stdin: personal.stdout)
        #expect(mine.status == 0 && mine.stdout == Data("mine\n".utf8), "\(mine.err)")
        #expect(try allowed.records(action: "unprotect-data").count == 1)
    }

    @Test("at protectionLevel audit decrypt -o goes ahead and is recorded once as audited")
    func decryptAudited() throws {
        let s = try AuditSandbox(level: "audit")
        let copy = s.sandbox.path("copy.txt")
        let result = try s.run(["decrypt", s.file, "-o", copy])
        #expect(result.status == 0, "\(result.err)")
        #expect(String(decoding: try s.sandbox.read(copy), as: UTF8.self) == s.plaintext)
        let records = try s.records(action: "decrypt")
        #expect(records.count == 1)
        #expect(records.first?["decision"] as? String == "audited")
        #expect(records.first?["rule"] as? String == "allowUserDecrypt=false")
    }

    @Test("at protectionLevel off decrypt goes ahead with no denial record, only the administrative one")
    func decryptOff() throws {
        let s = try AuditSandbox(level: "off")
        let copy = s.sandbox.path("copy.txt")
        #expect(try s.run(["decrypt", s.file, "-o", copy]).status == 0)
        #expect(String(decoding: try s.sandbox.read(copy), as: UTF8.self) == s.plaintext)
        let records = try s.records()
        #expect(records.allSatisfy { $0["decision"] as? String == "allowed" && $0["rule"] as? String == "" })
        #expect(try s.records(action: "decrypt").count == 1)
    }

    @Test("protect --account '' or another account of a work tree: 77, nothing changed, every work object recorded denied")
    func protectDeclassifyDenied() throws {
        let s = try AuditSandbox(level: "block")
        try s.sandbox.write("work/sub/notes.txt", "notes\n")
        #expect(try s.run(["protect", s.sandbox.path("work/sub/notes.txt"), "--account", Fixtures.upn]).status == 0)
        let before = try s.sandbox.read(s.file)
        for target in ["", Fixtures.otherAccount] {
            let result = try s.run(["protect", s.sandbox.path("work"), "-R", "--account", target])
            #expect(result.status == 77)
            #expect(result.errLines.count == 1)
            #expect(result.err.contains("allowUserDecrypt=false") && result.err.contains(s.sandbox.path("work")))
        }
        let single = try s.run(["protect", s.file, "--account", ""])
        #expect(single.status == 77)
        #expect(single.err.hasPrefix("mamfs: protect: \(s.file): denied by policy (allowUserDecrypt=false)"))
        #expect(try s.sandbox.read(s.file) == before)
        #expect(try info(s, s.file)["owner"] as? String == Fixtures.account)
        #expect(try info(s, s.sandbox.path("work"))["owner"] as? String == Fixtures.account)
        #expect(try info(s, s.sandbox.path("work/sub/notes.txt"))["owner"] as? String == Fixtures.account)
        let denied = try s.records().filter { $0["decision"] as? String == "denied" }
        #expect(denied.allSatisfy { $0["action"] as? String == "declassify" && $0["rule"] as? String == "allowUserDecrypt=false" })
        #expect(denied.reduce(0) { $0 + (($1["count"] as? NSNumber)?.intValue ?? 0) } == 2 * 3 + 1, "tree, report, notes twice; the file once")
        // Protecting for the owner itself is no declassification.
        #expect(try s.run(["protect", s.sandbox.path("work"), "-R", "--account", Fixtures.account]).status == 0)
    }

    @Test("protect at protectionLevel audit declassifies and records every work object as audited")
    func protectDeclassifyAudited() throws {
        let s = try AuditSandbox(level: "audit")
        let result = try s.run(["protect", s.file, "--account", ""])
        #expect(result.status == 0, "\(result.err)")
        #expect(try info(s, s.file)["owner"] as? String == "")
        let records = try s.records(action: "declassify")
        #expect(records.map { $0["decision"] as? String } == ["audited"])
    }

    @Test("a tree protect that fails part of the way is recorded: the files before the failure were changed")
    func partialTreeProtectIsRecorded() throws {
        let s = try AuditSandbox(level: "block", allowUserDecrypt: true)
        let first = try s.sandbox.write("tree/a.txt", "first\n")
        // A damaged header stops the walk at b.txt (only the rewrite reads it): a.txt is done.
        var damaged = Data([0x89] + Array("MAMFS\r\n".utf8))
        damaged.append(Data(repeating: 0xFF, count: 200))
        let broken = try s.sandbox.write("tree/b.txt", damaged)
        let result = try s.run(["protect", s.sandbox.path("tree"), "-R", "--account", Fixtures.upn])
        #expect(result.status == 65, "\(result.out) \(result.err)")
        #expect(try info(s, first)["encrypted"] as? Bool == true)
        #expect(try s.sandbox.read(broken) == damaged)
        let records = try s.records(action: "protect").filter { ($0["path"] as? String)?.hasSuffix("/tree") == true }
        let all = try s.records()
        #expect(records.count == 1, "\(all)")
    }

    @Test("the administrative actions are recorded as allowed: enroll, protect, declassify, decrypt, policy set, wipe, unenroll")
    func administrativeActions() throws {
        let s = try AuditSandbox(level: "block", allowUserDecrypt: true)
        let copy = s.sandbox.path("copy.txt")
        #expect(try s.run(["decrypt", s.file, "-o", copy]).status == 0)
        #expect(try s.run(["protect", s.file, "--account", ""]).status == 0)
        let policy = try s.sandbox.write("policy2.json", #"{"fileEncryptionRequired": false}"#)
        #expect(try s.run(["policy", "set", Fixtures.upn, policy]).status == 0)
        #expect(try s.run(["wipe", Fixtures.upn, "--root", s.sandbox.path("work")]).status == 0)
        #expect(try s.run(["unenroll", Fixtures.account]).status == 0)
        let records = try s.records()
        #expect(records.map { $0["action"] as? String } == ["enroll", "protect", "decrypt", "declassify", "policy set", "wipe", "unenroll"])
        #expect(records.allSatisfy { $0["decision"] as? String == "allowed" })
        #expect(records.first?["path"] as? String == Fixtures.account)
        #expect(records.allSatisfy { ($0["executable"] as? String)?.hasSuffix("/mamfs") == true })
        #expect(records.allSatisfy { ($0["uid"] as? NSNumber)?.uint32Value == getuid() })
        #expect(try s.run(["audit", "verify"]).out == "audit log verified: 7 records\n")
    }

    @Test("audit verify: 0 and the count when intact; 65 naming the seq of an edited, a removed and a truncated record")
    func verify() throws {
        let s = try AuditSandbox(level: "block")
        for _ in 0..<3 { _ = try s.run(["decrypt", s.file, "-o", s.sandbox.path("copy")]) }
        let ok = try s.run(["audit", "verify"])
        #expect(ok.status == 0)
        #expect(ok.out == "audit log verified: 5 records\n")
        let original = try s.logLines()

        var edited = original
        edited[2] = edited[2].replacingOccurrences(of: "\"denied\"", with: "\"allowed\"")
        try s.writeLog(edited)
        let editedRun = try s.run(["audit", "verify"])
        #expect(editedRun.status == 65)
        #expect(editedRun.errLines == ["mamfs: audit verify: \(s.logPath): first bad record: seq 3: record 3 was edited (its hash does not match)"])

        var removed = original
        removed.remove(at: 1)
        try s.writeLog(removed)
        let removedRun = try s.run(["audit", "verify"])
        #expect(removedRun.status == 65)
        #expect(removedRun.err.contains("seq 2: record 2 is missing"))

        try s.writeLog(Array(original.prefix(4)))
        let truncated = try s.run(["audit", "verify"])
        #expect(truncated.status == 65)
        #expect(truncated.err.contains("seq 5: record 5 is missing from the end"))

        try s.writeLog(original)
        #expect(try s.run(["audit", "verify"]).status == 0)
        try FileManager.default.removeItem(atPath: s.logPath)
        let deleted = try s.run(["audit", "verify"])
        #expect(deleted.status == 65)
        #expect(deleted.err.contains("seq 1: audit.log is missing"))
    }

    @Test("audit --json prints every field of every record; the text form has a header and one line each")
    func jsonAndText() throws {
        let s = try AuditSandbox(level: "block")
        _ = try s.run(["decrypt", s.file])
        let records = try s.records()
        #expect(records.count == 3)
        let keys: Set<String> = ["seq", "time", "uid", "pid", "executable", "action", "path", "owner", "decision", "rule", "count", "hash"]
        #expect(records.allSatisfy { Set($0.keys) == keys })
        #expect(records.map { ($0["seq"] as? NSNumber)?.intValue } == [1, 2, 3])
        #expect(records.allSatisfy { ($0["hash"] as? String)?.count == 64 })
        let text = try s.run(["audit"])
        #expect(text.status == 0)
        let lines = text.out.split(separator: "\n")
        #expect(lines.count == 4)
        #expect(lines.first?.hasPrefix("SEQ  TIME") == true)
        #expect(lines.last?.contains("denied") == true && lines.last?.contains("allowUserDecrypt=false") == true)
    }

    @Test("audit --since (ISO 8601 or relative) and --account filter the records")
    func filters() throws {
        let s = try AuditSandbox(level: "block")
        let personal = try s.sandbox.write("mine.txt", "mine\n")
        #expect(try s.run(["protect", personal, "--account", ""]).status == 0)
        _ = try s.run(["decrypt", s.file])
        let all = try s.records()
        #expect(all.count == 4)
        #expect(try s.records(["--since", "1d"]).count == 4)
        #expect(try s.records(["--since", "2999-01-01T00:00:00Z"]).isEmpty)
        let third = try #require(all[2]["time"] as? String)
        let fromThird = try s.records(["--since", third])
        #expect(fromThird.count >= 2 && fromThird.allSatisfy { ($0["time"] as? String ?? "") >= third })
        #expect(try s.records(["--since", "2000-01-01"]).count == 4)
        #expect(try s.records(["--account", Fixtures.upn.uppercased()]).map { $0["action"] as? String } == ["enroll", "protect", "decrypt"],
                "the work tree, its protect and the denied decrypt are the account's")
        #expect(try s.records(["--account", ""]).map { $0["path"] as? String } == [personal])
        #expect(try s.records(["--account", Fixtures.otherAccount]).isEmpty)
        #expect(try s.run(["audit", "--account", "nobody@contoso.com"]).status == 77)
        let bad = try s.run(["audit", "--since", "yesterday"])
        #expect(bad.status == 64)
        #expect(bad.err.contains("--since"))
    }

    @Test("two processes appending at once keep one valid chain")
    func concurrentProcesses() throws {
        let s = try AuditSandbox(level: "block", allowUserDecrypt: true)
        let policy = try s.sandbox.write("policy2.json", #"{"fileEncryptionRequired": true}"#)
        let script = "for i in $(seq 1 15); do \"$1\" policy set \(Fixtures.account) \"$2\" --state \"$3\" >/dev/null || exit 1; done"
        let group = DispatchGroup()
        let lock = NSLock()
        nonisolated(unsafe) var statuses: [Int32] = []
        let environment = s.sandbox.environment
        let state = s.sandbox.state
        for _ in 0..<2 {
            group.enter()
            DispatchQueue.global().async {
                let status = (try? runProcess("/bin/sh", ["-c", script, "sh", MamfsBinary.path, policy, state],
                                              environment: environment).status) ?? -1
                lock.lock(); statuses.append(status); lock.unlock()
                group.leave()
            }
        }
        group.wait()
        #expect(statuses == [0, 0])
        #expect(try s.records(action: "policy set").count == 30)
        let verify = try s.run(["audit", "verify"])
        #expect(verify.status == 0, "\(verify.err)")
        #expect(verify.out == "audit log verified: 32 records\n")
    }

    @Test("a provider import the receive check refuses is recorded as denied by receiveData")
    func providerImportRefusal() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let remote = sandbox.path("remote")
        let local = sandbox.path("local")
        try sandbox.write("remote/a.txt", "alpha\n")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        #expect(try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn]).status == 0)
        let source = try sandbox.write("outside/personal.txt", "my own notes\n")
        #expect(try sandbox.run(["provider", "import", source, "--to", local]).status == 77)
        let records = try jsonArray(try sandbox.run(["audit", "--json"])).filter { $0["action"] as? String == "provider import" }
        #expect(records.count == 1)
        #expect(records.first?["decision"] as? String == "denied")
        #expect(records.first?["rule"] as? String == "receiveData")
        #expect(records.first?["path"] as? String == source)
        #expect(records.first?["owner"] as? String == "")
    }

    /// A declassification used to go ahead when its record could not be written (a read-only
    /// or full state, an audit log that cannot be opened): `decrypt` exited 0 with a warning.
    @Test("decrypt, decrypt -o, unprotect-data and protect --account '' of work data refuse (74) and change nothing when the audit log cannot be written; allowed and audited alike; other verbs go on")
    func unrecordableDeclassificationRefused() throws {
        for level in ["block", "audit"] {
            let s = try AuditSandbox(level: level, allowUserDecrypt: level == "block")
            let stored = try s.sandbox.read(s.file)
            // A directory in the log's place: every open of it for writing fails (EISDIR), for root too.
            try FileManager.default.removeItem(atPath: s.logPath)
            try FileManager.default.createDirectory(atPath: s.logPath, withIntermediateDirectories: false)
            let copy = s.sandbox.path("copy.txt")
            let attempts: [(String, ProcessResult)] = [
                ("decrypt", try s.run(["decrypt", s.file])),
                ("decrypt -o", try s.run(["decrypt", s.file, "-o", copy])),
                ("decrypt -o -", try s.run(["decrypt", s.file, "-o", "-"])),
                ("unprotect-data", try s.sandbox.run(["unprotect-data"], stdin: stored)),
                ("protect", try s.run(["protect", s.file, "--account", ""])),
            ]
            for (verb, result) in attempts {
                #expect(result.status == 74, "\(level) \(verb): \(result.err)")
                #expect(result.err.contains("the audit log \(s.logPath) cannot be written"), "\(level) \(verb): \(result.err)")
                #expect(result.err.contains("nothing was changed"), "\(level) \(verb): \(result.err)")
                #expect(result.stdout.isEmpty, "\(level) \(verb)")
            }
            let unchanged = try s.sandbox.read(s.file) == stored
            #expect(unchanged, "\(level)")
            #expect(!FileManager.default.fileExists(atPath: copy))
            #expect(try info(s, s.file)["owner"] as? String == Fixtures.account)
            // Not a declassification: goes on, the failed record reported on stderr.
            let personal = try s.sandbox.write("mine.txt", "mine\n")
            let encrypt = try s.run(["encrypt", personal, "--account", Fixtures.upn])
            #expect(encrypt.status == 0, "\(level): \(encrypt.err)")
        }
    }

    /// `protect -R --account ''` of an untagged directory holding work files declassified them
    /// with only a "protect" record of the directory (owner ""), and with a broken log, none.
    @Test("protect -R of an untagged directory holding work files records their declassification first, under their owner; refused (74) when it cannot")
    func treeDeclassificationBelowUntaggedDirectory() throws {
        let s = try AuditSandbox(level: "block", allowUserDecrypt: true)
        let first = try s.sandbox.write("plain/a/w.txt", "work\n")
        #expect(try s.run(["encrypt", first, "--account", Fixtures.upn]).status == 0)
        let result = try s.run(["protect", s.sandbox.path("plain"), "-R", "--account", ""])
        #expect(result.status == 0, "\(result.err)")
        #expect(try info(s, first)["owner"] as? String == "")
        let records = try s.records(action: "declassify")
        #expect(records.map { $0["path"] as? String } == [first])
        #expect(records.first?["owner"] as? String == Fixtures.account)
        #expect(try s.records(["--account", Fixtures.account]).contains { $0["action"] as? String == "declassify" })

        let second = try s.sandbox.write("plain2/b/w.txt", "work\n")
        #expect(try s.run(["encrypt", second, "--account", Fixtures.upn]).status == 0)
        try FileManager.default.removeItem(atPath: s.logPath)
        try FileManager.default.createDirectory(atPath: s.logPath, withIntermediateDirectories: false)
        let refused = try s.run(["protect", s.sandbox.path("plain2"), "-R", "--account", ""])
        #expect(refused.status == 74, "\(refused.err)")
        #expect(try info(s, second)["owner"] as? String == Fixtures.account)
    }

    /// A declassification recorded first and then failed (a damaged file, an output that
    /// cannot be made) left only its "allowed" (or "audited") record: the log said the work
    /// data was made personal when it was not.
    @Test("decrypt, decrypt -o, unprotect-data and protect --account '' of damaged work data: the record written first is followed by a failed one (rule exit=N); allowed and audited alike")
    func failedDeclassificationRecorded() throws {
        for level in ["block", "audit"] {
            let s = try AuditSandbox(level: level, allowUserDecrypt: level == "block")
            let first = level == "block" ? "allowed" : "audited"
            var damaged = try s.sandbox.read(s.file)
            damaged[damaged.count - 1] ^= 0x01  // the last block's tag
            try damaged.write(to: URL(fileURLWithPath: s.file))
            let copy = s.sandbox.path("copy.txt")
            let attempts: [(verb: String, action: String, path: String, result: ProcessResult)] = [
                ("decrypt", "decrypt", s.file, try s.run(["decrypt", s.file])),
                ("decrypt -o", "decrypt", s.file, try s.run(["decrypt", s.file, "-o", copy])),
                ("unprotect-data", "unprotect-data", "-", try s.sandbox.run(["unprotect-data"], stdin: damaged)),
                ("protect", "declassify", s.file, try s.run(["protect", s.file, "--account", ""])),
            ]
            for attempt in attempts {
                #expect(attempt.result.status == 65, "\(level) \(attempt.verb): \(attempt.result.err)")
            }
            #expect(try s.sandbox.read(s.file) == damaged, "\(level)")
            #expect(!FileManager.default.fileExists(atPath: copy))
            let records = try s.records().filter { ["decrypt", "unprotect-data", "declassify"].contains($0["action"] as? String) }
            let expected = attempts.flatMap { [($0.action, $0.path, first), ($0.action, $0.path, "failed")] }
            #expect(records.map { ($0["action"] as? String ?? "") + " " + ($0["path"] as? String ?? "") + " " + ($0["decision"] as? String ?? "") }
                    == expected.map { "\($0.0) \($0.1) \($0.2)" }, "\(level): \(records)")
            let failed = records.filter { $0["decision"] as? String == "failed" }
            #expect(failed.count == 4 && failed.allSatisfy { $0["rule"] as? String == "exit=65" && $0["owner"] as? String == Fixtures.account },
                    "\(level): \(failed)")
            #expect(try s.run(["audit", "verify"]).status == 0)
        }
    }
}
