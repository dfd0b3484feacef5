import Foundation
import Testing
import MAMTestSupport

@Suite("Security: the state directory and key file belong to their user alone")
struct SecurityStateTests {
    func mode(_ path: String) -> mode_t {
        var st = stat()
        guard stat(path, &st) == 0 else { return 0 }
        return st.st_mode & 0o7777
    }

    @Test("init on an existing 0777 directory sets it to 0700 and says so")
    func initFixesAWorldWritableDirectory() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        #expect(chmod(sandbox.state, 0o777) == 0)
        let result = try sandbox.run(["init"])
        #expect(result.status == 0, "\(result.err)")
        #expect(mode(sandbox.state) == 0o700, "mode is \(String(mode(sandbox.state), radix: 8))")
        #expect((result.out + result.err).contains("0700"), "\(result.out) \(result.err)")
    }

    @Test("init refuses a state directory owned by another user (77)")
    func initRefusesAnotherUsersDirectory() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        #expect(chown(sandbox.state, 65534, 65534) == 0)
        let result = try sandbox.run(["init"])
        #expect(result.status == 77, "\(result.status) \(result.err)")
        #expect(result.err.contains("owned by"), "\(result.err)")
        #expect(!sandbox.exists(sandbox.state + "/state.db"))
    }

    @Test("a state directory, master key or database file others can read the key of or write, or owned by another user, is refused (77)",
          arguments: ["dir-0777", "dir-0770", "key-0666", "key-0620", "dir-owner", "key-owner",
                      "key-0644", "key-0640", "key-0604",
                      "db-0666", "db-0660", "db-0602", "db-owner",
                      "wal-0666", "wal-owner", "shm-0620", "shm-owner"])
    func openRefusesUnsafeState(_ change: String) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let key = sandbox.state + "/master.key"
        let parts = change.split(separator: "-").map(String.init)
        let file: String
        let named: String
        switch parts[0] {
        case "dir": (file, named) = (sandbox.state, "state directory")
        case "key": (file, named) = (key, "master key")
        case "db": (file, named) = (sandbox.state + "/state.db", "state.db")
        case "wal": (file, named) = (sandbox.state + "/state.db-wal", "state.db-wal")
        default: (file, named) = (sandbox.state + "/state.db-shm", "state.db-shm")
        }
        if !sandbox.exists(file) {
            // SQLite removes -wal and -shm when the last connection closes; a leftover one
            // (a crashed or running mount) is what another user could plant or edit.
            #expect(FileManager.default.createFile(atPath: file, contents: Data(), attributes: [.posixPermissions: 0o600]))
        }
        if parts[1] == "owner" {
            #expect(chown(file, 65534, 65534) == 0)
        } else {
            #expect(chmod(file, mode_t(parts[1], radix: 8) ?? 0o777) == 0)
        }
        let result = try sandbox.run(["accounts"])
        #expect(result.status == 77, "\(change): \(result.status) \(result.err)")
        #expect(result.err.contains(named), "\(result.err)")
        #expect(result.err.contains(parts[1] == "owner" ? "owned by another user" : "mode \(parts[1])"), "\(result.err)")
        #expect(result.errLines.count == 1, "\(result.err)")
    }

    @Test("init under any umask gives state files that are 0600 and pass the checks",
          arguments: ["000", "022", "077"])
    func initUnderAnyUmaskGivesSafeState(_ umask: String) throws {
        let sandbox = try Sandbox()
        var env = sandbox.environment
        env["MAMFS"] = MamfsBinary.path
        env["STATE"] = sandbox.state
        let made = try runProcess("/bin/bash", ["-c", "umask \(umask); \"$MAMFS\" init --state \"$STATE\""],
                                  stdin: Data(), environment: env)
        #expect(made.status == 0, "\(made.err)")
        for name in ["master.key", "state.db"] {
            #expect(mode(sandbox.state + "/" + name) == 0o600, "\(name): \(String(mode(sandbox.state + "/" + name), radix: 8))")
        }
        let policy = try sandbox.write("policy.json", Fixtures.encryptingPolicy)
        let enrolled = try runProcess("/bin/bash", ["-c", "umask \(umask); \"$MAMFS\" enroll \(Fixtures.account) --policy \"$1\" --state \"$STATE\"", "-", policy],
                                      stdin: Data(), environment: env)
        #expect(enrolled.status == 0, "\(enrolled.err)")
        let listed = try sandbox.run(["accounts"])
        #expect(listed.status == 0, "\(listed.err)")
        #expect(listed.out.contains(Fixtures.account), "\(listed.out)")
    }

    @Test("side files SQLite made while the database was read-only get the database's mode again: later writes work",
          .enabled(if: geteuid() == 0, "runs mamfs as user nobody"))
    func readOnlyMomentLeavesNoReadOnlySideFiles() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let chowned = try runProcess("/usr/bin/chown", ["-R", "65534:65534", sandbox.state], stdin: Data(), environment: sandbox.environment)
        try #require(chowned.status == 0, "\(chowned.err)")
        func asNobody(_ arguments: [String]) throws -> ProcessResult {
            try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", MamfsBinary.path]
                           + arguments + ["--state", sandbox.state], stdin: Data(), environment: sandbox.environment)
        }
        let database = sandbox.state + "/state.db"
        #expect(chmod(database, 0o400) == 0)
        let read = try asNobody(["accounts"])
        #expect(read.status == 0, "\(read.err)")
        #expect(mode(database + "-shm") == 0o400, "SQLite made the side file with the read-only mode")
        #expect(chmod(database, 0o600) == 0)
        let policy = try sandbox.write("policy-encrypt.json", Fixtures.encryptingPolicy)
        let enrolled = try asNobody(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy])
        #expect(enrolled.status == 0, "\(enrolled.err)")
        let listed = try asNobody(["accounts"])
        #expect(listed.out.contains(Fixtures.account), "\(listed.out) \(listed.err)")
    }

    @Test("a state directory another user cannot read reports permission denied (77), not a missing state")
    func unreadableStateIsPermissionDenied() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        #expect(mode(sandbox.state) == 0o700)
        chmod(sandbox.root, 0o755)
        let result = try runProcess("/usr/bin/setpriv",
                                    ["--reuid=65534", "--regid=65534", "--clear-groups", MamfsBinary.path,
                                     "accounts", "--state", sandbox.state],
                                    stdin: Data(), environment: sandbox.environment)
        #expect(result.status == 77, "\(result.status) \(result.err)")
        #expect(result.err.lowercased().contains("permission denied"), "\(result.err)")
        #expect(!result.err.contains("no mamfs state"), "\(result.err)")
    }
}
