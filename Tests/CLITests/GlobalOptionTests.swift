import Foundation
import Testing
import MAMTestSupport

/// `--state DIR`, `--help`, `--version` and `-v/--verbose` before the verb, as in git and
/// systemctl, and the same options after it.
@Suite("CLI: global options before the verb")
struct GlobalOptionTests {
    @Test("--state DIR and --state=DIR before the verb name the state directory as after it")
    func stateBeforeVerb() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let after = try sandbox.run(["accounts"])
        #expect(after.status == 0, "\(after.err)")
        #expect(after.out.contains(Fixtures.account))
        for arguments in [["--state", sandbox.state, "accounts"], ["--state=\(sandbox.state)", "accounts"],
                          ["-v", "--state", sandbox.state, "accounts"], ["--state", sandbox.state, "--verbose", "accounts"],
                          ["--state", sandbox.state, "accounts", "-v"]] {
            let before = try sandbox.run(arguments, withState: false)
            #expect(before.status == 0, "\(arguments): \(before.err)")
            #expect(before.stdout == after.stdout, "\(arguments)")
            #expect(before.stderr.isEmpty, "\(arguments)")
        }
        let sub = try sandbox.run(["--state", sandbox.state, "policy", "show", Fixtures.account], withState: false)
        #expect(sub.status == 0, "\(sub.err)")
        #expect(sub.out.contains("fileEncryptionRequired"))
    }

    @Test("--state before and after the verb is one option given twice (64)")
    func stateTwice() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.run(["--state", sandbox.state, "accounts", "--state", sandbox.state], withState: false)
        #expect(result.status == 64)
        #expect(result.errLines == ["mamfs: accounts: option '--state' given more than once", "Try 'mamfs accounts --help'."])
    }

    @Test("--help and --version before the verb; --help VERB shows the verb's help")
    func helpAndVersion() throws {
        let sandbox = try Sandbox()
        let top = try sandbox.run(["--help"], withState: false)
        let withState = try sandbox.run(["--state", sandbox.state, "-v", "--help"], withState: false)
        #expect(top.status == 0 && withState.status == 0)
        #expect(top.stdout == withState.stdout)
        #expect(top.out.hasPrefix("usage: mamfs [--state DIR] [-v] VERB [ARGUMENTS]\n"))
        #expect(top.out.contains("\n  -v, --verbose           say more: mount prints the daemon's pid and the daemon logs when it mounts"))
        #expect(top.out.contains("\n  --state DIR             the state directory"))
        #expect(top.stderr.isEmpty)
        let verbHelp = try sandbox.run(["--help", "mount"], withState: false)
        #expect(verbHelp.status == 0)
        #expect(verbHelp.out.hasPrefix("usage: mamfs mount"))
        #expect(verbHelp.out.contains("  -v, --verbose "))
        for arguments in [["--version"], ["-v", "--version"], ["--state", sandbox.state, "--version"]] {
            let version = try sandbox.run(arguments, withState: false)
            #expect(version.status == 0, "\(arguments)")
            #expect(version.out == "mamfs 0.1.0\n", "\(arguments)")
            #expect(version.stderr.isEmpty)
        }
    }

    @Test("an unknown option, a missing --state value or a missing verb before the verb: one clear line and a hint, 64",
          arguments: [
            (["--bogus", "accounts"], "mamfs: unknown option '--bogus'"),
            (["-v", "-x", "accounts"], "mamfs: unknown option '-x'"),
            (["--state"], "mamfs: option '--state' needs a value"),
            (["--state", "/nonexistent", "-v"], "mamfs: missing verb"),
            (["--verbose=yes", "accounts"], "mamfs: option '--verbose' takes no value"),
          ])
    func unknownBeforeVerb(arguments: [String], line: String) throws {
        let result = try Sandbox().run(arguments, withState: false)
        #expect(result.status == 64, "\(arguments): \(result.err)")
        #expect(result.errLines == [line, "Try 'mamfs --help'."], "\(arguments)")
        #expect(result.stdout.isEmpty)
    }

    @Test("every verb's help lists -v/--verbose", arguments: UsageTests.verbs)
    func verbHelpListsVerbose(verb: String) throws {
        let result = try Sandbox().run(verb.split(separator: " ").map(String.init) + ["--help"], withState: false)
        #expect(result.status == 0)
        #expect(result.out.contains("\n  -v, --verbose "))
    }
}
