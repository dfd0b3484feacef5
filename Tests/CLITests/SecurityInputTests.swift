import Foundation
import Testing
import MAMTestSupport

@Suite("Security: hostile input is rejected and never echoed at length")
struct SecurityInputTests {
    @Test("a policy with a duplicate key is refused (64), naming the key", arguments: [
        #"{"receiveData": "all", "receiveData": "managedOnly"}"#,
        #"{"receiveData": "all", "fileEncryptionRequired": true, "receive\u0044ata": "managedOnly"}"#,
    ])
    func duplicatePolicyKey(_ json: String) throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("dup.json", json)
        let result = try sandbox.run(["enroll", Fixtures.account, "--policy", policy])
        #expect(result.status == 64, "\(result.status) \(result.err)")
        #expect(result.err.contains("duplicate key 'receiveData'"), "\(result.err)")
        let set = try sandbox.run(["policy", "set", Fixtures.account, policy])
        #expect(set.status != 0)
    }

    @Test("keys that repeat only in nested objects or inside strings are not duplicates")
    func nestedKeysAreNotDuplicates() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("ok.json", #"{"receiveData": "all", "saveToLocations": ["Other"], "openFromLocations": ["Other"], "fileEncryptionRequired": true}"#)
        let result = try sandbox.run(["enroll", Fixtures.account, "--policy", policy])
        #expect(result.status == 0, "\(result.err)")
    }

    /// The protected-format header of a plain-tagged buffer claiming `owner`.
    func plainHeader(owner: String) -> Data {
        let ownerBytes = Array(owner.utf8)
        let length = 13 + ownerBytes.count
        return Data([0x89, 0x4D, 0x41, 0x4D, 0x46, 0x53, 0x0D, 0x0A, 1, 0, UInt8(length & 0xff), UInt8(length >> 8),
                     UInt8(ownerBytes.count)] + ownerBytes)
    }

    @Test("unprotect-data of a forged plain buffer claiming the managed account is refused (65)")
    func forgedPlainBuffer() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let forged = plainHeader(owner: Fixtures.account) + Data("not really managed".utf8)
        let result = try sandbox.run(["unprotect-data"], stdin: forged)
        #expect(result.status == 65, "\(result.status) \(result.err)")
        #expect(result.stdout.isEmpty)
        #expect(result.err.contains("plain"), "\(result.err)")
        // A plain buffer of an unmanaged identity is fine.
        let personal = try sandbox.run(["unprotect-data"], stdin: plainHeader(owner: "") + Data("personal".utf8))
        #expect(personal.status == 0, "\(personal.err)")
        #expect(personal.stdout == Data("personal".utf8))
    }

    @Test("decrypt of a plain-tagged file claiming the managed account writes its body untagged (nothing is vouched for)")
    func plainTaggedFileOfManagedAccount() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let forged = try sandbox.write("forged.txt", plainHeader(owner: Fixtures.account) + Data("plain on disk".utf8))
        let copy = sandbox.path("copy.txt")
        let result = try sandbox.run(["decrypt", forged, "-o", copy])
        #expect(result.status == 0, "\(result.status) \(result.err)")
        #expect(try sandbox.read(copy) == Data("plain on disk".utf8))
        let info = try jsonArray(try sandbox.run(["info", "--json", copy]))
        #expect(info.first?["owner"] is NSNull, "the copy is untagged")
    }

    @Test("errors quote at most a short prefix of bad input")
    func errorsQuoteAShortPrefix() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let huge = String(repeating: "A", count: 50 << 20)
        let badValue = try sandbox.write("big-value.json", #"{"receiveData": ""# + huge + #""}"#)
        let badKey = try sandbox.write("big-key.json", #"{""# + huge + #"": true}"#)
        let badLocation = try sandbox.write("big-location.json", #"{"saveToLocations": [""# + huge + #""]}"#)
        for policy in [badValue, badKey, badLocation] {
            let result = try sandbox.run(["policy", "set", Fixtures.account, policy])
            #expect(result.status == 64, "\(result.status)")
            #expect(result.stderr.count < 1000, "\(result.stderr.count) bytes of stderr")
            #expect(result.err.contains("AAAA…"), "\(result.err.prefix(300))")
        }
        let longName = String(repeating: "b", count: 100_000)
        for arguments in [["protect", sandbox.root, "--account", longName],
                          ["protect", sandbox.root, "--account", longName + "@contoso.com"],
                          ["wipe", longName],
                          [longName],
                          ["accounts", "--" + longName]] {
            let result = try sandbox.run(arguments)
            #expect(result.status != 0)
            #expect(result.stderr.count < 1000, "\(arguments[0].prefix(10)): \(result.stderr.count) bytes of stderr")
        }
    }

    /// Runs `script` under bash in the sandbox root with `$MAMFS`, `$STATE` and `$ACCOUNT` set,
    /// so names built with printf reach mamfs's argv as raw bytes (runProcess takes Strings).
    func bash(_ sandbox: Sandbox, _ script: String) throws -> ProcessResult {
        var env = sandbox.environment
        env["MAMFS"] = MamfsBinary.path
        env["STATE"] = sandbox.state
        env["ACCOUNT"] = Fixtures.account
        return try runProcess("/bin/bash", ["-c", "cd \"$1\" && " + script, "-", sandbox.root],
                              stdin: Data(), environment: env)
    }

    @Test("a path argument that is not UTF-8 is refused (64) and no file, not even its lossy twin, changes",
          arguments: [
              #""$MAMFS" encrypt "$(printf 'x\xff')" --account "$ACCOUNT" --state "$STATE""#,
              #""$MAMFS" encrypt "$(printf 'x\xef\xbf\xbd')" --account "$ACCOUNT" -o "$(printf 'x\xff')" --state "$STATE""#,
              #""$MAMFS" protect "$(printf 'x\xff')" --account "$ACCOUNT" --state "$STATE""#,
              #""$MAMFS" info "$(printf 'x\xff')" --state "$STATE""#,
              #""$MAMFS" decrypt "$(printf 'x\xff')" -o copy --state "$STATE""#,
              #""$MAMFS" decrypt "$(printf 'x\xef\xbf\xbd')" -o "$(printf 'x\xff')" --state "$STATE""#,
              #""$MAMFS" accounts --state "$(printf 'st\xff')""#,
          ])
    func nonUTF8ArgumentIsRefused(_ script: String) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let made = try bash(sandbox, #"printf 'INTENDED\n' > "$(printf 'x\xff')"; printf 'OTHER\n' > "$(printf 'x\xef\xbf\xbd')"; ln -s state "$(printf 'st\xff')"; ln -s state "$(printf 'st\xef\xbf\xbd')""#)
        #expect(made.status == 0, "\(made.err)")
        let result = try bash(sandbox, script)
        #expect(result.status == 64, "\(result.status) \(result.err)")
        #expect(result.err.contains("is not valid UTF-8"), "\(result.err)")
        #expect(result.err.contains("\\xff"), "\(result.err)")
        #expect(result.errLines.count <= 2, "\(result.err)")
        let contents = try bash(sandbox, #"cat "$(printf 'x\xff')"; cat "$(printf 'x\xef\xbf\xbd')"; ls"#)
        #expect(contents.out.hasPrefix("INTENDED\nOTHER\n"), "\(contents.out)")
        #expect(!sandbox.exists(sandbox.path("copy")))
    }

    @Test("a state or passphrase path in the environment that is not UTF-8 is refused (64)",
          arguments: ["MAMFS_STATE", "MAMFS_PASSPHRASE_FILE", "XDG_DATA_HOME", "HOME"])
    func nonUTF8EnvironmentPathIsRefused(_ variable: String) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let made = try bash(sandbox, #"printf 'INTENDED\n' > "$(printf 'x\xff')"; printf 'OTHER\n' > "$(printf 'x\xef\xbf\xbd')""#)
        #expect(made.status == 0, "\(made.err)")
        let value = variable == "MAMFS_PASSPHRASE_FILE" || variable == "MAMFS_STATE" ? "$PWD/st" : "$PWD/h"
        let result = try bash(sandbox, "\(variable)=\"\(value)$(printf '\\xff')\" \"$MAMFS\" encrypt \"$(printf 'x\\xef\\xbf\\xbd')\" --account \"$ACCOUNT\" --state \"$STATE\"")
        #expect(result.status == 64, "\(variable): \(result.status) \(result.err)")
        #expect(result.err.contains(variable), "\(result.err)")
        #expect(result.err.contains("is not valid UTF-8"), "\(result.err)")
        let contents = try bash(sandbox, #"cat "$(printf 'x\xef\xbf\xbd')""#)
        #expect(contents.out == "OTHER\n", "\(contents.out)")
    }

    /// `enroll --upn` took a UPN holding an escape sequence, which `accounts` then printed raw
    /// (driving the reader's terminal).
    @Test("a UPN with a control character or a blank inside is refused (64) and echoed without it", arguments: [
        "evil\u{1b}[31m@contoso.com", "a\nb@contoso.com", "a\tb@contoso.com", "a@contoso\u{9b}31m.com", "a\u{7f}@contoso.com",
        "a\u{a0}b@contoso.com", "admin\u{202e}moc.osotnoc@x.com", "a\u{200b}b@contoso.com", "a@contoso\u{feff}.com",
    ])
    func upnWithControlCharacters(_ upn: String) throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        for arguments in [["enroll", "--upn", upn, "--policy", policy], ["enroll", Fixtures.account, "--upn", upn, "--policy", policy]] {
            let result = try sandbox.run(arguments)
            #expect(result.status == 64, "\(result.err)")
            #expect(result.err.contains("is not a UPN"), "\(result.err)")
            #expect(!result.err.unicodeScalars.contains { $0.value == 0x1b || $0.value == 0x9b || $0.value == 0x7f }, "\(result.err)")
        }
        #expect(try jsonArray(try sandbox.run(["accounts", "--json"])).isEmpty)
    }

    @Test("text tables write control characters as escapes (a stored UPN, a file name); --json keeps them")
    func tablesEscapeControlCharacters() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        // A UPN stored before enroll checked for control characters.
        let stored = "evil\u{1b}]0;owned\u{7}@contoso.com"
        let update = try bash(sandbox, "python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE accounts SET upn=?\", (sys.argv[2],)); c.commit()' \"$STATE/state.db\" \"$(printf 'evil\\033]0;owned\\007@contoso.com')\"")
        #expect(update.status == 0, "\(update.err)")
        let accounts = try sandbox.run(["accounts"])
        #expect(accounts.status == 0, "\(accounts.err)")
        #expect(accounts.out.contains("evil\\x1b]0;owned\\x07@contoso.com"), "\(accounts.out)")
        #expect(!accounts.out.unicodeScalars.contains { $0.value == 0x1b || $0.value == 0x07 })
        #expect(try jsonArray(try sandbox.run(["accounts", "--json"])).first?["upn"] as? String == stored)

        let file = try sandbox.write("two\nlines\u{1b}[2J.txt", "x\n")
        #expect(try sandbox.run(["encrypt", file, "--account", Fixtures.account]).status == 0)
        let info = try sandbox.run(["info", file])
        #expect(info.status == 0, "\(info.err)")
        #expect(info.out.split(separator: "\n").count == 2, "\(info.out)")
        #expect(info.out.contains("two\\nlines\\x1b[2J.txt"), "\(info.out)")
        #expect(try jsonArray(try sandbox.run(["info", "--json", file])).first?["path"] as? String == file)
        let reversed = try sandbox.write("invoice\u{202e}fdp.exe", "x\n")
        #expect(try sandbox.run(["encrypt", reversed, "--account", Fixtures.account]).status == 0)
        let shown = try sandbox.run(["info", reversed])
        #expect(shown.out.contains("invoice\\u{202e}fdp.exe"), "\(shown.out)")
    }

    /// Lines outside tables printed names and values raw: a file name with an escape sequence
    /// or a newline drove the terminal or forged a line.
    @Test("lines for people escape control characters of names and values (verify-protect, can-receive, wipe -v, config get's listing); --json keeps them")
    func linesEscapeControlCharacters() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let root = sandbox.path("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let name = "a\u{1b}[2Jb\nc\u{202e}d.txt"
        let escaped = "a\\x1b[2Jb\\nc\\u{202e}d.txt"
        let file = root + "/" + name
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: file))
        #expect(try sandbox.run(["encrypt", file, "--account", Fixtures.account]).status == 0)
        let shownPath = root + "/" + escaped

        let verify = try sandbox.run(["verify-protect", file, "--account", Fixtures.account])
        #expect(verify.status == 0, "\(verify.err)")
        #expect(verify.out == "\(shownPath): protected for \(Fixtures.account)\n")
        let receive = try sandbox.run(["can-receive", file, "--account", Fixtures.account])
        #expect(receive.status == 0, "\(receive.err)")
        #expect(receive.out.hasPrefix("\(shownPath): \(Fixtures.account) may receive it (owner "), "\(receive.out)")
        #expect(receive.out.split(separator: "\n").count == 1, "\(receive.out)")

        let policy = try sandbox.write("p.json", #"{"appConfig": {"motd": "hello\n\u001b]0;owned\u0007"}}"#)
        #expect(try sandbox.run(["policy", "set", Fixtures.account, policy]).status == 0)
        let listing = try sandbox.run(["config", "get", Fixtures.account])
        #expect(listing.out == "motd=hello\\n\\x1b]0;owned\\x07\n", "\(listing.out)")
        let exact = try JSONSerialization.jsonObject(with: try sandbox.run(["config", "get", Fixtures.account, "--json"]).stdout)
        #expect((exact as? [String: String])?["motd"] == "hello\n\u{1b}]0;owned\u{7}")

        let wipe = try sandbox.run(["-v", "wipe", Fixtures.account, "--root", root])
        #expect(wipe.status == 0, "\(wipe.err)")
        #expect(wipe.out.contains("removed \(shownPath)\n"), "\(wipe.out)")
        #expect(!wipe.out.unicodeScalars.contains { $0.value == 0x1b || $0.value == 0x202e }, "\(wipe.out)")
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// A state.db replaced by another program's database or an empty file was taken as a new
    /// state: mamfs wrote its tables into it, then failed with an internal error (70).
    @Test("a state.db that is another program's SQLite database, or empty, is refused (65) and left as it was")
    func foreignStateDatabase() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let database = sandbox.state + "/state.db"
        for make in ["import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE notes(x)'); c.commit()",
                     "import sys; open(sys.argv[1], 'wb').close()"] {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
            let made = try bash(sandbox, "python3 -c \(shellQuote(make)) \"$STATE/state.db\"")
            #expect(made.status == 0, "\(made.err)")
            let before = try sandbox.read(database)
            for arguments in [["accounts"], ["audit"], ["enroll", Fixtures.account, "--policy", try sandbox.write("p.json", Fixtures.encryptingPolicy)]] {
                let result = try sandbox.run(arguments)
                #expect(result.status == 65, "\(arguments) \(result.err)")
                #expect(result.err.contains("is not a mamfs state database"), "\(arguments) \(result.err)")
            }
            let unchanged = try sandbox.read(database) == before
            #expect(unchanged, "\(make)")
        }
    }

    /// A state of a newer mamfs, or one with a malformed row, was reported as an internal error (70).
    @Test("a state written by a newer mamfs, or holding a malformed row, is a data error (65) that says which, not an internal error (70)",
          arguments: [
            ("PRAGMA user_version = 99", ["accounts"], "written by a newer mamfs: state database"),
            ("UPDATE meta SET value = CAST('argon9' AS BLOB) WHERE key = 'kdf'", ["accounts"], "written by a newer mamfs: unknown key derivation 'argon9'"),
            ("DELETE FROM meta WHERE key = 'kek.check'", ["accounts"], "damaged database: the state has no master key check value"),
            ("INSERT OR REPLACE INTO audit_tail(id, seq, hash) VALUES (1, 'abc', 'x')", ["audit", "verify"], "damaged database: malformed row in audit_tail"),
          ])
    func newerOrMalformedState(change: String, arguments: [String], message: String) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let made = try bash(sandbox, "python3 -c \(shellQuote("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()")) \"$STATE/state.db\" \(shellQuote(change))")
        try #require(made.status == 0, "\(made.err)")
        let result = try sandbox.run(arguments)
        #expect(result.status == 65, "\(result.err)")
        #expect(result.err.contains(message), "\(result.err)")
    }

    /// A damaged state.db was reported as an internal error (70).
    @Test("a damaged or foreign state.db is a data error (65) naming the database, for every verb that opens the state")
    func damagedStateDatabase() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("f.txt", "secret\n")
        #expect(try sandbox.run(["encrypt", file, "--account", Fixtures.account]).status == 0)
        let stored = try sandbox.read(file)
        let database = sandbox.state + "/state.db"
        let original = try sandbox.read(database)
        var damaged = original
        for index in 100..<4096 { damaged[index] = UInt8(truncatingIfNeeded: index &* 131) }
        for contents in [damaged, Data("SQLite format 3\0 but nothing after".utf8), Data(repeating: 0x5A, count: 8192)] {
            try contents.write(to: URL(fileURLWithPath: database))
            try? FileManager.default.removeItem(atPath: database + "-wal")
            try? FileManager.default.removeItem(atPath: database + "-shm")
            for arguments in [["accounts"], ["decrypt", file], ["info", file]] {
                let result = try sandbox.run(arguments)
                #expect(result.status == 65, "\(arguments) \(result.err)")
                #expect(result.err.contains("damaged database"), "\(arguments) \(result.err)")
                #expect(result.err.contains("restore it from a backup"), "\(arguments) \(result.err)")
            }
            let unchanged = try sandbox.read(file) == stored
            #expect(unchanged)
        }
    }
}
