import Foundation
import MAMTestSupport
import Testing
@testable import MAMProtection

/// The gate on account keys, the recorded result and the event hook, in the library.
@Suite("Compliance gate")
struct ComplianceGateTests {
    final class Recorder: ComplianceEventSink, @unchecked Sendable {
        var events: [(String, ComplianceStatus, Bool)] = []
        func complianceResultRecorded(account: AccountIdentity, result: ComplianceResult, wiped: Bool) {
            events.append((account.accountId, result.status, wiped))
        }
    }

    static func policy(_ script: String, maxAge: Int = 3600, extra: [ComplianceCheck] = []) -> Policy {
        var policy = Policy.demoEncrypting
        policy.compliance = [ComplianceCheck(kind: .command([script], timeoutSeconds: 5))] + extra
        policy.complianceMaxAge = maxAge
        return policy
    }

    static func script(_ fixture: StateFixture, exit code: Int32) throws -> String {
        let path = fixture.root + "/check.sh"
        try writeExecutable(path, "#!/bin/sh\necho 'exit \(code)'\nexit \(code)\n")
        return path
    }

    @Test("keys are refused before a check, handed out after a Compliant one, refused after a NotCompliant one; each result reaches the event sink")
    func keysFollowTheResult() throws {
        let fixture = try StateFixture(enroll: nil)
        let script = try Self.script(fixture, exit: 0)
        try fixture.context.enrollment.enroll(accountId: StateFixture.managedId, upn: StateFixture.managedUPN, policy: Self.policy(script))
        let recorder = Recorder()
        fixture.context.complianceEvents = recorder
        let file = try fixture.write("a.txt", Array("plain".utf8))

        #expect(throws: MAMError.policyDenied("account alice@contoso.com: compliance never checked (run 'mamfs compliance check alice@contoso.com')")) {
            try fixture.context.files.encryptFile(path: file, forAccountId: StateFixture.managedId)
        }
        let report = try fixture.context.compliance.check(StateFixture.managedUPN)
        #expect(report.result.status == .compliant)
        try fixture.context.files.encryptFile(path: file, forAccountId: StateFixture.managedId)
        #expect(try fixture.plaintext(file) == Array("plain".utf8))

        _ = try Self.script(fixture, exit: 1)
        #expect(try fixture.context.compliance.check(StateFixture.managedId).result.status == .notCompliant)
        #expect(throws: MAMError.policyDenied("account alice@contoso.com: not compliant: command \(script): exit 1")) {
            _ = try fixture.plaintext(file)
        }
        #expect(recorder.events.map(\.0) == [StateFixture.managedId, StateFixture.managedId])
        #expect(recorder.events.map(\.1) == [.compliant, .notCompliant])
        #expect(recorder.events.map(\.2) == [false, false])
        let stored = try fixture.context.state.complianceResults()[StateFixture.managedId]
        #expect(stored?.status == .notCompliant)
        #expect(stored?.failedCheck == "command \(script)")
        #expect(stored?.reason == "exit 1")
    }

    @Test("another process's result reaches a long-lived context at its next refresh")
    func otherProcessResult() throws {
        let fixture = try StateFixture(enroll: nil)
        let script = try Self.script(fixture, exit: 0)
        try fixture.context.enrollment.enroll(accountId: StateFixture.managedId, upn: nil, policy: Self.policy(script))
        let other = try ProtectionContext.open(stateDirectory: fixture.stateDirectory, passphraseFile: nil)
        #expect(throws: MAMError.self) { try other.requireAccountKey(accountId: StateFixture.managedId) }
        _ = try fixture.context.compliance.check(StateFixture.managedId)
        #expect(other.refreshIfChanged())
        try other.requireAccountKey(accountId: StateFixture.managedId)
    }

    @Test("the decision: never checked, not Compliant, older than the maximum age, the site's device")
    func decision() throws {
        let policy = Self.policy("/bin/true", maxAge: 60, extra: [ComplianceCheck(kind: .encryptedBackingDevice)])
        let now = Date()
        let ok = ComplianceResult(status: .compliant, checkedAt: now.addingTimeInterval(-30), failedCheck: nil, reason: "2 checks passed")
        func refusal(_ result: ComplianceResult?, site: ComplianceOutcome? = nil) -> String? {
            ComplianceGate.refusal(policy: policy, result: result, now: now, account: "a@b.c", siteDevice: { site })?.message
        }
        #expect(refusal(nil) == "compliance never checked (run 'mamfs compliance check a@b.c')")
        #expect(refusal(ok) == nil)
        #expect(refusal(ComplianceResult(status: .networkFailure, checkedAt: now, failedCheck: "command /x", reason: "offline"))
                == "not compliant (NetworkFailure): command /x: offline")
        let old = ComplianceResult(status: .compliant, checkedAt: now.addingTimeInterval(-61), failedCheck: nil, reason: "")
        #expect(refusal(old)?.hasPrefix("compliance result older than complianceMaxAge (60 s): checked ") == true)
        let tmpfs = ComplianceOutcome(check: "encryptedBackingDevice", status: .notCompliant, reason: "/d is on tmpfs")
        #expect(refusal(ok, site: tmpfs) == "not compliant: encryptedBackingDevice: /d is on tmpfs")
        var noDevice = policy
        noDevice.compliance = [ComplianceCheck(kind: .screenLockEnabled)]
        #expect(ComplianceGate.refusal(policy: noDevice, result: ok, now: now, account: "a", siteDevice: { tmpfs }) == nil)
        #expect(ComplianceGate.refusal(policy: Policy(), result: nil, now: now, account: "a", siteDevice: { nil }) == nil)
    }

    @Test("a version 3 state gains the compliance table and keeps its accounts")
    func migration() throws {
        let dir = try TempDirectory(prefix: "mamfs-compliance-state")
        let stateDirectory = StateDirectory(path: dir.path + "/state")
        let store = try StateStore.open(directory: stateDirectory, create: true)
        try store.upsertAccount(AccountRecord(accountId: StateFixture.managedId, managed: true))
        try store.database.execute("DROP TABLE compliance_results; PRAGMA user_version = 3")
        store.close()
        let reopened = try StateStore.open(directory: stateDirectory, create: false)
        #expect(try reopened.database.queryFirst("PRAGMA user_version")?.int64(0) == 4)
        #expect(try reopened.account(named: StateFixture.managedId) != nil)
        #expect(try reopened.complianceResults().isEmpty)
        let result = ComplianceResult(status: .userCancelled, checkedAt: Date(timeIntervalSince1970: 1_700_000_000.123),
                                      failedCheck: "screenLockEnabled", reason: "no")
        try reopened.setComplianceResult(result, accountId: StateFixture.managedId.uppercased())
        #expect(try reopened.complianceResults() == [StateFixture.managedId: result])
    }
}
