import Foundation
import Testing
@testable import MAMProtection

@Suite("Policy key fileProtectionLevel")
struct FileProtectionLevelPolicyTests {
    @Test("absent: none, and not written by jsonData")
    func defaultIsNone() throws {
        let policy = try Policy.parse(Data("{}".utf8), source: "p.json")
        #expect(policy.fileProtectionLevel == .none)
        #expect(!String(decoding: policy.jsonData(), as: UTF8.self).contains("fileProtectionLevel"))
    }

    @Test("each level is read case-insensitively and round-trips through jsonData", arguments: [
        ("complete", FileProtectionLevel.complete), ("CompleteUnlessOpen", .completeUnlessOpen),
        ("untilfirstuserauth", .untilFirstUserAuth), ("none", .none),
    ])
    func levels(name: String, level: FileProtectionLevel) throws {
        let policy = try Policy.parse(Data(#"{"fileProtectionLevel": "\#(name)"}"#.utf8), source: "p.json")
        #expect(policy.fileProtectionLevel == level)
        let text = String(decoding: policy.jsonData(), as: UTF8.self)
        #expect(text.contains(#""fileProtectionLevel": "\#(level.rawValue)""#) == (level != .none), "\(text)")
        #expect(try Policy.parse(policy.jsonData(), source: "again") == policy)
    }

    @Test("only complete and completeUnlessOpen drop keys on a lock")
    func dropsKeys() {
        #expect(FileProtectionLevel.allCases.filter(\.dropsKeysOnLock) == [.complete, .completeUnlessOpen])
    }

    @Test("a bad value is rejected with the key and the allowed names", arguments: [
        (#"{"fileProtectionLevel": "always"}"#, "key 'fileProtectionLevel': 'always' is not one of complete, completeUnlessOpen, untilFirstUserAuth, none"),
        (#"{"fileProtectionLevel": true}"#, "key 'fileProtectionLevel': expected a string, got a boolean"),
    ])
    func rejected(json: String, message: String) {
        do {
            _ = try Policy.parse(Data(json.utf8), source: "p.json")
            Issue.record("accepted \(json)")
        } catch let MAMError.invalidArguments(text) {
            #expect(text == "policy p.json: " + message, "\(text)")
        } catch {
            Issue.record("\(error)")
        }
    }
}
