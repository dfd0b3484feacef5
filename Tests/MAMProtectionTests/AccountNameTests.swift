import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

@Suite("Account names: accountId, UPN and the homeAccountId OID.TID")
struct AccountNameTests {
    static let oid = "8c7f3e1a-0000-4000-8000-000000000001"
    static let tid = "72f988bf-86f1-41af-91ab-2d7cd011db47"

    @Test("OID.TID parses to the OID as key and the TID as tenant")
    func valid() throws {
        let name = try AccountIdentity.parseName("\(Self.oid).\(Self.tid)")
        #expect(name == AccountName(key: Self.oid, tenantId: Self.tid))
        #expect(name.isAccountId)
    }

    @Test("uppercase GUIDs and surrounding blanks come back canonical")
    func uppercase() throws {
        let name = try AccountIdentity.parseName("  \(Self.oid.uppercased()).\(Self.tid.uppercased()) ")
        #expect(name.key == Self.oid)
        #expect(name.tenantId == Self.tid)
    }

    @Test("an accountId, a UPN with dots and other text are their canonical selves without a tenant")
    func otherForms() throws {
        #expect(try AccountIdentity.parseName(Self.oid.uppercased()) == AccountName(key: Self.oid))
        #expect(try AccountIdentity.parseName("Ann.Lee@Contoso.co.uk") == AccountName(key: "ann.lee@contoso.co.uk"))
        #expect(try AccountIdentity.parseName("") == AccountName(key: ""))
        #expect(try AccountIdentity.parseName("report.txt") == AccountName(key: "report.txt"))
    }

    @Test("malformed homeAccountIds are invalid arguments", arguments: [
        "\(oid).", ".\(tid)", "\(oid).\(tid).\(tid)", "\(oid).1234", "\(oid)..\(tid)", "\(oid).\(tid)x",
        "8c7f3e1a-0000-4000-8000-00000000000.\(tid)",
    ])
    func malformed(_ text: String) throws {
        #expect(throws: MAMError.self) { try AccountIdentity.parseName(text) }
        do {
            _ = try AccountIdentity.parseName(text)
        } catch let error as MAMError {
            guard case .invalidArguments(let message) = error else {
                Issue.record("expected invalidArguments, got \(error)")
                return
            }
            #expect(message.contains("OID.TID"))
        }
    }

    @Test("the state resolves OID.TID to the account, checks a recorded tenant, and resolveOwner takes an unregistered OID")
    func stateLookup() throws {
        let f = try StateFixture(enroll: nil)
        try f.context.enrollment.enroll(accountId: "\(Self.oid).\(Self.tid)", upn: "ann@contoso.com", policy: .demoEncrypting)
        #expect(try f.context.state.account(named: "\(Self.oid.uppercased()).\(Self.tid)")?.tenantId == Self.tid)
        #expect(try f.context.resolveOwner("\(Self.oid).\(Self.tid)") == Self.oid)
        #expect(throws: MAMError.self) { try f.context.state.account(named: "\(Self.oid).\(StateFixture.otherId)") }
        #expect(try f.context.resolveOwner("\(StateFixture.otherId).\(Self.tid)") == StateFixture.otherId)
    }

    @Test("an allowed-accounts list admits an account by any of its names and refuses others with policyDenied")
    func allowedAccounts() throws {
        let f = try StateFixture()
        #expect(try f.context.enrollment.isAllowed([StateFixture.otherId]), "no list: everyone")
        try f.context.state.setAllowedAccounts([StateFixture.managedUPN.uppercased()])
        #expect(try f.context.enrollment.isAllowed([StateFixture.managedId]), "registered: its UPN is listed")
        #expect(try f.context.enrollment.isAllowed([""]), "the unmanaged identity")
        #expect(try !f.context.enrollment.isAllowed([StateFixture.otherId]))
        #expect(throws: MAMError.policyDenied("account \(StateFixture.otherId) is not in the allowed accounts (see 'mamfs accounts allowed')")) {
            try f.context.enrollment.enroll(accountId: StateFixture.otherId, upn: nil, policy: .demoEncrypting)
        }
    }
}
