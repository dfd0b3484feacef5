import Foundation
import Testing
@testable import MAMProtection

@Suite("Policy key appConfig")
struct AppConfigPolicyTests {
    private func parse(_ text: String) throws -> Policy {
        try Policy.parse(Data(text.utf8), source: "test.json")
    }

    @Test("appConfig is read as name -> string, absent is empty, and survives jsonData")
    func roundTrip() throws {
        let policy = try parse(#"{"appConfig": {"Theme": "dark", "url": "https://intranet.contoso.com/a\"b"}}"#)
        #expect(policy.appConfig == ["Theme": "dark", "url": "https://intranet.contoso.com/a\"b"])
        #expect(policy.appConfigValue("Theme") == "dark")
        #expect(policy.appConfigValue("theme") == nil, "names are case-sensitive")
        #expect(try parse("{}").appConfig.isEmpty)
        #expect(try Policy.parse(policy.jsonData(), source: "again") == policy)
        #expect(!String(decoding: try parse("{}").jsonData(), as: UTF8.self).contains("appConfig"))
    }

    @Test("non-string values, a non-object and an empty name are refused naming the key",
          arguments: [#"{"appConfig": {"a": 1}}"#, #"{"appConfig": {"a": true}}"#, #"{"appConfig": {"a": null}}"#,
                      #"{"appConfig": {"a": ["x"]}}"#, #"{"appConfig": {"a": {}}}"#, #"{"appConfig": ["a"]}"#,
                      #"{"appConfig": "a=b"}"#, #"{"appConfig": {"": "x"}}"#, #"{"appConfig": {"a": "x", "a": "y"}}"#])
    func rejected(_ text: String) throws {
        do {
            _ = try parse(text)
            Issue.record("accepted \(text)")
        } catch let MAMError.invalidArguments(message) {
            #expect(message.contains("test.json"))
            #expect(message.contains("appConfig") || message.contains("duplicate key"), "\(message)")
        }
    }

    @Test("the scrubber replaces every value case-insensitively, longest first, in strings and keys")
    func scrubber() throws {
        let scrubber = Scrubber(values: ["ann@contoso.com", "/home/ann", "/home/ann/secret"])
        #expect(scrubber.scrub("owner ANN@Contoso.com at /home/ann/secret/x") == "owner [scrubbed] at [scrubbed]/x")
        let tree = scrubber.scrubTree(["ann@contoso.com": ["/home/ann/a", 3, true]]) as? [String: [Any]]
        #expect(tree?.keys.sorted() == ["[scrubbed]"])
        #expect(tree?["[scrubbed]"]?.first as? String == "[scrubbed]/a")
        #expect(tree?["[scrubbed]"]?[1] as? Int == 3)
    }
}
