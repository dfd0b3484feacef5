import Foundation
import Testing
import MAMTestSupport

@Suite("CLI: help, version and usage errors")
struct UsageTests {
    static let verbs = ["init", "enroll", "unenroll", "accounts", "accounts allow", "accounts allowed", "policy show",
                        "policy set", "protect", "info", "verify-protect", "can-receive",
                        "encrypt", "decrypt", "protect-data", "unprotect-data", "wipe", "mount", "unmount",
                        "audit", "audit verify", "config get", "diagnose", "scrub", "events"]

    @Test("the binary is found")
    func binaryFound() {
        #expect(FileManager.default.isExecutableFile(atPath: MamfsBinary.path), "mamfs at \(MamfsBinary.path)")
    }

    @Test("mamfs --help lists every verb and exits 0")
    func topHelp() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.run(["--help"], withState: false)
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        for verb in Self.verbs {
            #expect(result.out.contains("mamfs \(verb)"), "help lists \(verb)")
        }
    }

    @Test("mamfs --version prints the version")
    func version() throws {
        let result = try Sandbox().run(["--version"], withState: false)
        #expect(result.status == 0)
        #expect(result.out.hasPrefix("mamfs "))
        #expect(result.out.hasSuffix("\n"))
    }

    @Test("every verb answers --help with its usage and the --state option", arguments: verbs)
    func verbHelp(verb: String) throws {
        let result = try Sandbox().run(verb.split(separator: " ").map(String.init) + ["--help"], withState: false)
        #expect(result.status == 0)
        #expect(result.out.hasPrefix("usage: mamfs \(verb)"))
        #expect(result.out.contains("--state DIR"))
        #expect(result.stderr.isEmpty)
    }

    @Test("an unknown option is one error line plus a hint, exit 64")
    func unknownOption() throws {
        let result = try Sandbox().run(["protect", "x", "--account", "a", "--bogus"], withState: false)
        #expect(result.status == 64)
        #expect(result.errLines == ["mamfs: protect: unknown option '--bogus'", "Try 'mamfs protect --help'."])
        #expect(result.stdout.isEmpty)
    }

    @Test("usage errors exit 64", arguments: [
        [],
        ["frobnicate"],
        ["--frob"],
        ["init", "extra"],
        ["enroll"],
        ["enroll", Fixtures.account],
        ["enroll", Fixtures.account, "--policy"],
        ["unenroll"],
        ["unenroll", Fixtures.account, "--root", "/tmp"],
        ["accounts", "--json=yes"],
        ["policy"],
        ["policy", "delete", Fixtures.account],
        ["policy", "show"],
        ["policy", "set", Fixtures.account],
        ["protect", "--account", Fixtures.account],
        ["protect", "file"],
        ["info"],
        ["encrypt", "file"],
        ["encrypt", "a", "b", "--account", Fixtures.account],
        ["encrypt", "file", "--account", Fixtures.account, "--account", Fixtures.account],
        ["decrypt"],
        ["decrypt", "file", "-o"],
        ["protect-data"],
        ["protect-data", "extra", "--account", ""],
        ["unprotect-data", "--account", "x"],
        ["wipe"],
        ["wipe", Fixtures.account, "--root"],
        ["mount", "only-one"],
        ["unmount"],
    ])
    func usageErrors(arguments: [String]) throws {
        let result = try Sandbox().run(arguments, withState: false)
        #expect(result.status == 64, "\(arguments): \(result.err)")
        #expect(result.errLines.count == 2, "\(arguments): \(result.err)")
        #expect(result.errLines.first?.hasPrefix("mamfs: ") == true)
        #expect(result.errLines.last?.hasPrefix("Try 'mamfs") == true)
        #expect(result.stdout.isEmpty)
    }

    @Test("options accept --name=value, values may start with '-', and '--' ends options")
    func parsingForms() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("-dash.txt", "dash file\n")
        let byEquals = try sandbox.run(["protect", "--account=\(Fixtures.upn)", "--state", sandbox.state, "--", file],
                                       withState: false)
        #expect(byEquals.status == 0, "\(byEquals.err)")
        let info = try jsonArray(try sandbox.run(["info", "--json", "--state=\(sandbox.state)", "--", file], withState: false))
        #expect(info.first?["owner"] as? String == Fixtures.account)
        let decrypted = sandbox.path("plain")
        let attached = try sandbox.run(["decrypt", file, "-o\(decrypted)"])
        #expect(attached.status == 0, "\(attached.err)")
        #expect(try sandbox.read(decrypted) == Data("dash file\n".utf8))
    }
}
