import Foundation
import Testing
@testable import MAMProtection

/// `trimmingWhitespace()` replaces Foundation's `trimmingCharacters(in: .whitespaces)` on the
/// create path: it must trim exactly the same characters.
@Suite("Whitespace trimming")
struct WhitespaceTests {
    static let samples: [String] = [
        "", " ", "\t", "  \t ", "a", " a", "a ", "\ta\t", "  User@Contoso.com  ",
        "\u{00A0}nbsp\u{00A0}", "\u{3000}ideographic\u{2003}", "\u{2009}thin space inside\u{202F}",
        "\nnewline kept\n", " \n mixed \n ", "inner  spaces stay", "\u{200B}zero width space\u{200B}", "\u{200C}ZWNJ is kept\u{FEFF}",
        "caf\u{00E9} ", " \u{1F600}emoji\u{1F600} ", "\u{1680}ogham\u{205F}", "\r\u{0B}\u{0C}",
    ]

    @Test("Same result as Foundation's trimmingCharacters(in: .whitespaces)", arguments: samples)
    func matchesFoundation(sample: String) {
        #expect(sample.trimmingWhitespace() == sample.trimmingCharacters(in: .whitespaces))
        #expect(sample[...].trimmingWhitespace() == sample.trimmingCharacters(in: .whitespaces))
    }

    @Test("Every scalar up to U+3100 and the astral samples trim as with Foundation")
    func everyWhitespaceScalar() {
        for value in Array(UInt32(0)...0x3100) + [0xFEFF, 0xFFFF, 0x1F600, 0xE0020] {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "\(Character(scalar))x\(Character(scalar))"
            #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces), "U+\(String(value, radix: 16))")
        }
    }

    @Test("Account names are canonicalised as before")
    func canonicalAccountNames() {
        #expect(AccountIdentity.canonical("  User@Contoso.COM\t") == "user@contoso.com")
        #expect(AccountIdentity.canonical("\u{00A0}8C7F3E1A-0000-4000-8000-000000000001 ") == "8c7f3e1a-0000-4000-8000-000000000001")
        #expect(AccountIdentity.isAccountId(" 8c7f3e1a-0000-4000-8000-000000000001\t"))
        #expect(AccountIdentity.isUPN("\tuser@contoso.com "))
        #expect(!AccountIdentity.isUPN("us er@contoso.com"))
    }

    @Test("a name that is canonical already comes back unchanged; one with a capital, a blank at an end or non-ASCII is canonicalised")
    func canonicalFastPath() {
        for name in ["8c7f3e1a-0000-4000-8000-000000000001", "user@contoso.com", "", "a b", "x\n"] {
            #expect(AccountIdentity.canonical(name) == name.trimmingWhitespace().lowercased(), "\(name.debugDescription)")
        }
        #expect(AccountIdentity.canonical("user@contoso.Com") == "user@contoso.com")
        #expect(AccountIdentity.canonical("\tuser@contoso.com") == "user@contoso.com")
        #expect(AccountIdentity.canonical("user@contoso.com ") == "user@contoso.com")
        #expect(AccountIdentity.canonical("ÄNN@contoso.com") == "änn@contoso.com")
        #expect(AccountIdentity.canonical("ann@contoso.com\u{3000}") == "ann@contoso.com")
        #expect(AccountIdentity.canonical("\u{200B}ann") == "ann")
    }
}
