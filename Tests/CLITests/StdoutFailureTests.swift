import Foundation
import MAMTestSupport
import Testing

/// A command whose output cannot all be written to stdout (a full disk, /dev/full, a closed
/// descriptor) fails with EX_IOERR (74) and says why, instead of exiting 0 after a truncated
/// output: `mamfs protect-data < f > g && rm f` must never remove `f` when `g` is short. The
/// same for a stdin that cannot be read (a directory, a closed descriptor): 74, no crash.
@Suite("CLI: a failed write to stdout or read of stdin is an error")
struct StdoutFailureTests {
    /// Runs `mamfs ARGUMENTS --state STATE` with stdout redirected as `redirection` says (a
    /// shell redirection such as "> /dev/full" or ">&-").
    static func run(_ sandbox: Sandbox, _ arguments: [String], redirection: String, stdin: Data = Data()) throws -> ProcessResult {
        try runProcess("/bin/sh", ["-c", "\"$0\" \"$@\" \(redirection)", MamfsBinary.path] + arguments + ["--state", sandbox.state],
                       stdin: stdin, environment: sandbox.environment)
    }

    @Test("protect-data, unprotect-data, accounts and --version into /dev/full: exit 74 and ENOSPC named; into /dev/null: exit 0")
    func fullOutput() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let input = Fixtures.binary(256 << 10)
        let protected = try sandbox.run(["protect-data", "--account", Fixtures.account], stdin: input)
        #expect(protected.status == 0, "\(protected.err)")
        let commands: [(arguments: [String], stdin: Data)] = [
            (["protect-data", "--account", Fixtures.account], input),
            (["protect-data", "--account", Fixtures.account, "--base64"], input),
            (["unprotect-data"], protected.stdout),
            (["accounts"], Data()),
            (["--version"], Data()),
        ]
        for (arguments, stdin) in commands {
            let full = try Self.run(sandbox, arguments, redirection: "> /dev/full", stdin: stdin)
            #expect(full.status == 74, "\(arguments): \(full.status) \(full.err)")
            #expect(full.err.contains("cannot write to stdout: No space left on device"), "\(arguments): \(full.err)")
            let null = try Self.run(sandbox, arguments, redirection: "> /dev/null", stdin: stdin)
            #expect(null.status == 0, "\(arguments): \(null.status) \(null.err)")
        }
    }

    @Test("stdout closed: protect-data exits 74 naming EBADF")
    func closedOutput() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let closed = try Self.run(sandbox, ["protect-data", "--account", Fixtures.account], redirection: ">&-",
                                  stdin: Data("hi\n".utf8))
        #expect(closed.status == 74, "\(closed.status) \(closed.err)")
        #expect(closed.err.contains("cannot write to stdout: Bad file descriptor"), "\(closed.err)")
    }

    @Test("a command that fails on its own keeps its exit code when stdout fails too")
    func ownFailureKept() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let garbage = try Self.run(sandbox, ["unprotect-data", "--base64"], redirection: "> /dev/full",
                                   stdin: Data("not base64 !!!\n".utf8))
        #expect(garbage.status == 65, "\(garbage.status) \(garbage.err)")
        #expect(!garbage.err.contains("cannot write to stdout"))
    }

    @Test("stdin a directory or closed: protect-data and unprotect-data exit 74 naming the reason (no crash), stdout empty")
    func unreadableInput() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        for arguments in [["protect-data", "--account", Fixtures.account], ["unprotect-data"]] {
            for (redirection, reason) in [("< /", "Is a directory"), ("<&-", "Bad file descriptor")] {
                let result = try Self.run(sandbox, arguments, redirection: redirection)
                #expect(result.status == 74, "\(arguments) \(redirection): \(result.status) \(result.err)")
                #expect(result.err.contains("stdin: cannot read: \(reason)"), "\(arguments) \(redirection): \(result.err)")
                #expect(result.stdout.isEmpty)
            }
        }
    }
}
