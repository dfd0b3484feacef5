import Foundation
import Testing

@Suite("CLI: protect-data and unprotect-data")
struct DataTests {
    @Test("protect-data / unprotect-data round-trip binary data for the managed account")
    func binaryRoundTrip() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let input = Fixtures.binary(1 << 20)
        let protected = try sandbox.run(["protect-data", "--account", Fixtures.upn], stdin: input)
        #expect(protected.status == 0, "\(protected.err)")
        #expect(protected.stderr.isEmpty)
        #expect(protected.stdout.count > input.count)
        #expect(protected.stdout.range(of: input.prefix(4096)) == nil, "the output is encrypted")
        let plain = try sandbox.run(["unprotect-data"], stdin: protected.stdout)
        #expect(plain.status == 0, "\(plain.err)")
        #expect(plain.stdout == input)
    }

    @Test("--base64: one line of base64 out, base64 in")
    func base64RoundTrip() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let input = Data("quarterly numbers\u{0}\u{1}\n".utf8)
        let protected = try sandbox.run(["protect-data", "--account", Fixtures.account, "--base64"], stdin: input)
        #expect(protected.status == 0, "\(protected.err)")
        let text = protected.out
        #expect(text.hasSuffix("\n"))
        #expect(text.filter { $0 == "\n" }.count == 1)
        let decoded = Data(base64Encoded: text.trimmingCharacters(in: .newlines))
        #expect(decoded != nil)
        #expect(!(decoded ?? Data()).contains("quarterly"))
        let plain = try sandbox.run(["unprotect-data", "--base64"], stdin: protected.stdout)
        #expect(plain.status == 0, "\(plain.err)")
        #expect(plain.stdout == input)
        // base64 output decodes to what the raw mode accepts.
        let raw = try sandbox.run(["unprotect-data"], stdin: decoded ?? Data())
        #expect(raw.stdout == input)
    }

    @Test("protect-data for the unmanaged identity adds a header and keeps the data plain")
    func unmanagedData() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let input = Data("personal photo caption\n".utf8)
        let protected = try sandbox.run(["protect-data", "--account", ""], stdin: input)
        #expect(protected.status == 0, "\(protected.err)")
        #expect(protected.stdout.count > input.count)
        #expect(protected.stdout.suffix(input.count) == input)
        let plain = try sandbox.run(["unprotect-data"], stdin: protected.stdout)
        #expect(plain.stdout == input)
    }

    @Test("unprotect-data of data that was never protected returns it unchanged", arguments: [false, true])
    func unprotectedInput(base64: Bool) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let input = Data("just some text, never protected\n".utf8) + Fixtures.binary(1000)
        let stdin = base64 ? Data((input.base64EncodedString() + "\n").utf8) : input
        let result = try sandbox.run(["unprotect-data"] + (base64 ? ["--base64"] : []), stdin: stdin)
        #expect(result.status == 0, "\(result.err)")
        #expect(result.stdout == input)
        let empty = try sandbox.run(["unprotect-data"], stdin: Data())
        #expect(empty.status == 0)
        #expect(empty.stdout.isEmpty)
    }

    @Test("unprotect-data --base64 of text that is not base64 exits 65")
    func notBase64() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let result = try sandbox.run(["unprotect-data", "--base64"], stdin: Data("not *base64* at all".utf8))
        #expect(result.status == 65)
        #expect(result.errLines == ["mamfs: unprotect-data: stdin: input is not base64"])
        #expect(result.stdout.isEmpty)
    }

    @Test("tampered protected data exits 65 and writes nothing")
    func tamperedData() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        var protected = try sandbox.run(["protect-data", "--account", Fixtures.account], stdin: Fixtures.binary(10_000)).stdout
        protected[protected.count - 100] ^= 0x80
        let result = try sandbox.run(["unprotect-data"], stdin: protected)
        #expect(result.status == 65)
        #expect(result.errLines.count == 1)
        #expect(result.stdout.isEmpty)
    }

    @Test("protect-data for an unknown UPN exits 77")
    func unknownAccount() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let result = try sandbox.run(["protect-data", "--account", "nobody@contoso.com"], stdin: Data("x".utf8))
        #expect(result.status == 77)
        #expect(result.stdout.isEmpty)
    }
}
