import Foundation
import Testing
import MAMProtection
@testable import mamfs

@Suite("parseArguments")
struct ArgumentParserTests {
    /// A spec shaped like `mamfs mount`: a flag, single-valued options (long and one-letter),
    /// a repeatable option and two positionals.
    let spec = ArgumentSpec(flags: ["-f", "--json"], options: ["--account", "--to", "-x"],
                            repeatable: ["-o", "--root"], positionals: 1...2)

    func parse(_ arguments: [String], _ spec: ArgumentSpec? = nil) throws -> ParsedArguments {
        try parseArguments(arguments, spec: spec ?? self.spec)
    }

    func usageError(_ arguments: [String], _ spec: ArgumentSpec? = nil) -> String? {
        do {
            _ = try parse(arguments, spec)
            return nil
        } catch {
            return (error as? UsageError)?.message ?? "not a UsageError: \(error)"
        }
    }

    @Test("flags, options as --opt VALUE and --opt=VALUE, -oVALUE, positionals in any order")
    func forms() throws {
        let parsed = try parse(["a", "-f", "--account", "A1", "--to=D", "-xV", "b", "--json"])
        #expect(parsed.positionals == ["a", "b"])
        #expect(parsed.flags == ["-f", "--json"])
        #expect(parsed.options == ["--account": ["A1"], "--to": ["D"], "-x": ["V"]])
        #expect(parsed.flag("-f") && !parsed.wantsHelp)
        #expect(parsed.value("--account") == "A1")
        #expect(parsed.value("--missing") == nil)
        #expect(parsed.state == nil)
    }

    @Test("values may be empty, may start with '-', and may hold '='")
    func unusualValues() throws {
        let parsed = try parse(["p", "--account", "", "--to", "--json", "-x", "-", "--root=a=b"])
        #expect(parsed.options == ["--account": [""], "--to": ["--json"], "-x": ["-"], "--root": ["a=b"]])
        #expect(parsed.flags.isEmpty)
        #expect(try parse(["p", "--account="]).value("--account") == "")
    }

    @Test("a repeatable option keeps every value in order; the others refuse a second one")
    func repeated() throws {
        let parsed = try parse(["p", "-o", "ro", "-oallow_other", "--root", "/a", "-o=x"])
        #expect(parsed.values("-o") == ["ro", "allow_other", "=x"])
        #expect(parsed.values("--root") == ["/a"])
        #expect(parsed.values("--to") == [])
        #expect(usageError(["p", "--account", "a", "--account=b"]) == "option '--account' given more than once")
        #expect(usageError(["p", "--state", "s", "--state", "t"]) == "option '--state' given more than once")
    }

    @Test("a flag given twice is one flag")
    func repeatedFlag() throws {
        #expect(try parse(["p", "-f", "-f"]).flags == ["-f"])
    }

    @Test("-- ends the options; a lone - is a positional")
    func terminator() throws {
        let parsed = try parse(["--", "-f", "--account"])
        #expect(parsed.positionals == ["-f", "--account"])
        #expect(parsed.flags.isEmpty && parsed.options.isEmpty)
        #expect(try parse(["-", "--", "--"]).positionals == ["-", "--"])
    }

    @Test("unknown options, a value for a flag, a missing value", arguments: [
        (["p", "--bogus"], "unknown option '--bogus'"),
        (["p", "--bogus=1"], "unknown option '--bogus'"),
        (["p", "-q"], "unknown option '-q'"),
        (["p", "-fx"], "unknown option '-fx'"),
        (["p", "--json=yes"], "option '--json' takes no value"),
        (["p", "--account"], "option '--account' needs a value"),
        (["p", "-x"], "option '-x' needs a value"),
    ])
    func refused(arguments: [String], message: String) {
        #expect(usageError(arguments) == message)
    }

    @Test("positional counts")
    func positionalCounts() {
        #expect(usageError([]) == "missing argument")
        #expect(usageError(["a", "b", "c"]) == "unexpected extra argument 'c'")
        #expect(usageError(["x"], ArgumentSpec()) == "unexpected argument 'x'")
        #expect(usageError(["a"], ArgumentSpec(positionals: 2...3)) == "expected at least 2 arguments, got 1")
        #expect(usageError([], ArgumentSpec(atLeast: 1)) == "missing argument")
        #expect((try? parse(Array(repeating: "p", count: 50), ArgumentSpec(atLeast: 1)))?.positionals.count == 50)
    }

    @Test("--help skips the positional checks; --state and --help belong to every spec")
    func helpAndState() throws {
        #expect(try parse(["--help"]).wantsHelp)
        #expect(try parse(["a", "b", "c", "--help"]).wantsHelp)
        #expect(try parse(["--state", "S", "p"], ArgumentSpec(positionals: 1...1)).state == "S")
        #expect(usageError(["--help=1"]) == "option '--help' takes no value")
    }

    @Test("long input is quoted short in the message")
    func quotesShort() throws {
        let name = "--" + String(repeating: "n", count: 200)
        let message = try #require(usageError(["p", name]))
        #expect(message == "unknown option '\(InputQuote.short(name))'")
        #expect(message.count < 120)
    }
}

@Suite("CommandLineTool usage errors")
struct CommandLineToolUsageTests {
    @Test("usage errors exit 64 before any state is opened", arguments: [
        ["info", "--bogus"], ["info"], [], ["no-such-verb"], ["--bogus"], ["policy"], ["policy", "nope"],
        ["info", "p", "--state", ""],
    ])
    func usageExit(arguments: [String]) {
        #expect(CommandLineTool.run(arguments, environment: ["MAMFS_STATE": "/nonexistent-mamfs-state"]) == .usage)
    }

    @Test("help and version exit 0")
    func helpExit() {
        #expect(CommandLineTool.run(["--version"], environment: [:]) == .ok)
        #expect(CommandLineTool.run(["info", "--help"], environment: [:]) == .ok)
    }

    @Test("the help text lists the exit-code table")
    func helpListsCodes() {
        #expect(CommandLineTool.helpText.contains("exit codes: 0 ok, 64 usage, 65 corrupt or tampered data, 66 missing input, 69 no session bus\n(events) or no mount daemon answering (lock, unlock), 70 internal error, 73 cannot create output, 74 I/O or sync item error, 75 remote unreachable\nor daemon still running after unmount (retry later), 77 denied by policy or key unavailable;\ncompliance verbs: 80 NotCompliant, 81 NetworkFailure, 82 ServiceFailure, 83 UserCancelled,\n84 InteractionRequired."))
    }
}

@Suite("RawArguments")
struct RawArgumentsTests {
    /// Calls `invalidUTF8` with an argv made of `arguments` (argv[0] = "mamfs").
    func check(_ arguments: [[UInt8]]) -> String? {
        let all = [Array("mamfs".utf8)] + arguments
        var pointers: [UnsafeMutablePointer<CChar>?] = all.map { bytes in
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            for (index, byte) in bytes.enumerated() { pointer[index] = CChar(bitPattern: byte) }
            pointer[bytes.count] = 0
            return pointer
        }
        pointers.append(nil)
        defer { pointers.forEach { $0?.deallocate() } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            RawArguments.invalidUTF8(argc: Int32(all.count), argv: buffer.baseAddress!)
        }
    }

    @Test("UTF-8 arguments pass; the first invalid one is named by position with its bytes escaped")
    func arguments() {
        #expect(check([Array("info".utf8), Array("caf\u{E9}".utf8)]) == nil)
        #expect(check([Array("info".utf8), [0x78, 0xFF], [0xC0, 0x80]])
            == "mamfs: argument 2 ('x\\xff') is not valid UTF-8; mamfs accepts only UTF-8 arguments and paths")
    }

    @Test("overlong forms, surrogates and values above U+10FFFF are not UTF-8")
    func decoder() {
        #expect(RawArguments.isUTF8(Array("a\u{10FFFF}".utf8)))
        #expect(RawArguments.isUTF8([]))
        #expect(!RawArguments.isUTF8([0xC0, 0x80]))
        #expect(!RawArguments.isUTF8([0xED, 0xA0, 0x80]))
        #expect(!RawArguments.isUTF8([0xF4, 0x90, 0x80, 0x80]))
        #expect(!RawArguments.isUTF8([0xE2, 0x82]))
    }

    @Test("escapedPrefix: printable ASCII kept, quote, backslash and other bytes as \\xHH, cut after the limit")
    func escaping() {
        #expect(RawArguments.escapedPrefix([0x61, 0x27, 0x5C, 0x0A, 0xFF]) == "a\\x27\\x5c\\x0a\\xff")
        #expect(RawArguments.escapedPrefix(Array(repeating: 0x61, count: 40), limit: 4) == "aaaa…")
        #expect(RawArguments.escapedPrefix(Array(repeating: 0x61, count: 4), limit: 4) == "aaaa")
    }
}
