import Foundation
import Testing
@testable import MAMProtection

@Suite("Policy keys compliance, complianceMaxAge, wipeOnNonCompliance")
struct CompliancePolicyTests {
    private func parse(_ text: String) throws -> Policy {
        try Policy.parse(Data(text.utf8), source: "test.json")
    }

    @Test("every check kind is read with its keys, defaults apply, and the policy survives jsonData")
    func roundTrip() throws {
        let policy = try parse("""
            {"compliance": [
                {"check": "encryptedBackingDevice"},
                {"check": "screenLockEnabled", "remediate": ["/usr/bin/gnome-control-center", "privacy"], "remediateNeedsUser": true},
                {"check": "packagesUpdatedWithinDays", "days": 14},
                {"check": "command", "command": ["/usr/local/bin/edr", "--status", "a \\"b\\""], "timeoutSeconds": 2.5,
                 "remediate": ["/usr/local/bin/edr", "--start"]}
             ],
             "complianceMaxAge": "12h", "wipeOnNonCompliance": true}
            """)
        #expect(policy.compliance == [
            ComplianceCheck(kind: .encryptedBackingDevice),
            ComplianceCheck(kind: .screenLockEnabled, remediate: ["/usr/bin/gnome-control-center", "privacy"], remediateNeedsUser: true),
            ComplianceCheck(kind: .packagesUpdatedWithinDays(14)),
            ComplianceCheck(kind: .command(["/usr/local/bin/edr", "--status", "a \"b\""], timeoutSeconds: 2.5),
                            remediate: ["/usr/local/bin/edr", "--start"]),
        ])
        #expect(policy.complianceMaxAge == 43_200)
        #expect(policy.wipeOnNonCompliance)
        #expect(try Policy.parse(policy.jsonData(), source: "again") == policy)

        let minimal = try parse(#"{"compliance": [{"check": "command", "command": ["/bin/true"]}]}"#)
        #expect(minimal.compliance?.first?.kind == .command(["/bin/true"], timeoutSeconds: 30))
        #expect(minimal.complianceMaxAge == 86_400)
        #expect(!minimal.wipeOnNonCompliance)
        #expect(try Policy.parse(minimal.jsonData(), source: "again") == minimal)

        let none = try parse("{}")
        #expect(none.compliance == nil)
        #expect(!String(decoding: none.jsonData(), as: UTF8.self).contains("compliance"))
    }

    @Test("complianceMaxAge takes seconds or a duration with one unit", arguments: [
        ("90", 90), (#""90s""#, 90), (#""15m""#, 900), (#""12h""#, 43_200), (#""7d""#, 604_800), (#""365d""#, 31_536_000),
    ])
    func maxAge(_ value: String, _ seconds: Int) throws {
        let policy = try parse(#"{"compliance": [{"check": "screenLockEnabled"}], "complianceMaxAge": \#(value)}"#)
        #expect(policy.complianceMaxAge == seconds)
    }

    @Test("strict parsing refuses malformed checks and keys, naming the source, the key and what is wrong", arguments: [
        (#"{"compliance": {}}"#, "key 'compliance': expected an array"),
        (#"{"compliance": []}"#, "the list is empty"),
        (#"{"compliance": ["screenLockEnabled"]}"#, "element 0 must be an object"),
        (#"{"compliance": [{}]}"#, "element 0: missing 'check'"),
        (#"{"compliance": [{"check": "firewall"}]}"#, "unknown check 'firewall'"),
        (#"{"compliance": [{"check": "ScreenLockEnabled"}]}"#, "unknown check 'ScreenLockEnabled'"),
        (#"{"compliance": [{"check": "screenLockEnabled", "days": 3}]}"#, "unknown key 'days' for check 'screenLockEnabled'"),
        (#"{"compliance": [{"check": "packagesUpdatedWithinDays"}]}"#, "needs 'days'"),
        (#"{"compliance": [{"check": "packagesUpdatedWithinDays", "days": 1.5}]}"#, "'days' must be an integer"),
        (#"{"compliance": [{"check": "packagesUpdatedWithinDays", "days": true}]}"#, "'days' must be an integer"),
        (#"{"compliance": [{"check": "packagesUpdatedWithinDays", "days": -1}]}"#, "'days' must be an integer"),
        (#"{"compliance": [{"check": "command"}]}"#, "check 'command' needs 'command'"),
        (#"{"compliance": [{"check": "command", "command": "/bin/true"}]}"#, "'command' must be a non-empty array"),
        (#"{"compliance": [{"check": "command", "command": []}]}"#, "'command' must be a non-empty array"),
        (#"{"compliance": [{"check": "command", "command": ["true"]}]}"#, "must be an absolute path"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true", 1]}]}"#, "'command' must be a non-empty array"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true"], "timeoutSeconds": 0}]}"#, "'timeoutSeconds' must be a number"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true"], "timeoutSeconds": "5"}]}"#, "'timeoutSeconds' must be a number"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true"], "timeoutSeconds": 3601}]}"#, "'timeoutSeconds' must be a number"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true"], "remediate": ["fix"]}]}"#, "must be an absolute path"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true"], "remediateNeedsUser": 1}]}"#, "'remediateNeedsUser' must be true or false"),
        (#"{"compliance": [{"check": "command", "command": ["/bin/true"], "Command": ["/bin/true"]}]}"#, "unknown key 'Command'"),
        (#"{"compliance": [{"check": "command", "check": "command", "command": ["/bin/true"]}]}"#, "duplicate key 'check'"),
        (#"{"compliance": [{"check": "screenLockEnabled"}], "complianceMaxAge": 0}"#, "from 1 second to 365 days"),
        (#"{"compliance": [{"check": "screenLockEnabled"}], "complianceMaxAge": "366d"}"#, "from 1 second to 365 days"),
        (#"{"compliance": [{"check": "screenLockEnabled"}], "complianceMaxAge": "12 h"}"#, "is not a duration"),
        (#"{"compliance": [{"check": "screenLockEnabled"}], "complianceMaxAge": "h"}"#, "is not a duration"),
        (#"{"compliance": [{"check": "screenLockEnabled"}], "complianceMaxAge": true}"#, "expected a number of seconds"),
        (#"{"compliance": [{"check": "screenLockEnabled"}], "wipeOnNonCompliance": 1}"#, "key 'wipeOnNonCompliance': expected true or false"),
        (#"{"complianceMaxAge": 60}"#, "key 'complianceMaxAge' needs the key 'compliance'"),
        (#"{"wipeOnNonCompliance": true}"#, "key 'wipeOnNonCompliance' needs the key 'compliance'"),
    ])
    func rejected(_ text: String, _ expected: String) throws {
        do {
            _ = try parse(text)
            Issue.record("accepted \(text)")
        } catch let MAMError.invalidArguments(message) {
            #expect(message.hasPrefix("policy test.json: "), "\(message)")
            #expect(message.contains(expected), "\(message)")
        }
    }

    @Test("a command check's exit status maps to the statuses, each with its own exit code")
    func statusMapping() {
        #expect((0...6).map(ComplianceStatus.forCommandExit) ==
                [.compliant, .notCompliant, .networkFailure, .serviceFailure, .userCancelled, .interactionRequired, .serviceFailure])
        #expect(ComplianceStatus.forCommandExit(255) == .serviceFailure)
        let codes = ComplianceStatus.allCases.map(\.exitCode.rawValue)
        #expect(codes == [0, 80, 81, 82, 83, 84])
        let otherMeanings = Set(ExitCode.allCases.map(\.rawValue)).subtracting(codes)
        #expect(otherMeanings.isDisjoint(with: codes.dropFirst()))
    }
}
