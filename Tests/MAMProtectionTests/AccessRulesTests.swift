import Foundation
import Testing
@testable import MAMProtection

/// An executable with a fixed path and digest that counts how often its digest was asked.
private final class FakeExecutable: ExecutableIdentity, @unchecked Sendable {
    let path: String
    private let digest: String?
    private let lock = NSLock()
    private var asked = 0

    init(_ path: String, sha256: String? = nil) {
        self.path = path
        self.digest = sha256
    }

    func sha256() -> String? {
        lock.lock(); defer { lock.unlock() }
        asked += 1
        return digest
    }

    var digestRequests: Int {
        lock.lock(); defer { lock.unlock() }
        return asked
    }
}

private let work = "8c7f3e1a-0000-4000-8000-000000000001"
private let stranger = "5b2d9c40-0000-4000-8000-0000000000ff"
private let managedAppPath = "/usr/lib/libreoffice/program/soffice.bin"
private let managedApp = FakeExecutable(managedAppPath)
private let otherApp = FakeExecutable("/usr/bin/cat")
private let oneDrive = StorageLocation(named: "OneDriveForBusiness")!

/// The work account's policy for the table: only soffice is a managed app, only managed apps
/// get the data, nothing personal comes in, work data saves only to OneDrive, no user decrypt.
private func strictPolicy(_ level: ProtectionLevel) throws -> Policy {
    Policy(receiveData: .managedOnly, saveToLocations: [.oneDriveForBusiness],
           managedApps: [try ManagedAppRule(path: managedAppPath)], sendData: .managedApps,
           allowUserDecrypt: false, protectionLevel: level)
}

private func rules(_ policy: Policy) -> AccessRules {
    AccessRules(evaluator: PolicyEvaluator(policies: [work: policy]))
}

private func request(_ action: AccessAction, by executable: any ExecutableIdentity, owner: String?,
                     location: StorageLocation = .localDrive, appAccount: String = work) -> AccessRequest {
    AccessRequest(action: action, executable: executable, owner: owner, location: location, appAccount: appAccount)
}

/// One cell of the decision table: caller x object owner x action -> the rule that denies at
/// `block` ("" = allowed) and, for a create, the new file's owner.
struct AccessRuleCell: CustomStringConvertible, Sendable {
    let caller: String
    let object: String
    let action: String
    let rule: String
    let newOwner: String??

    var description: String { "\(caller) \(action) on \(object)" }
}

private let callers: [String: FakeExecutable] = ["M": managedApp, "U": otherApp]
/// W, P untagged, P tagged "", P owned by an account not managed here.
private let objects: [String: String?] = ["W": work, "P-untagged": nil, "P-empty": "", "P-unmanaged": stranger]
private let actions: [String: AccessAction] = [
    "open-read": .open(reading: true, writing: false), "open-write": .open(reading: false, writing: true),
    "open-readwrite": .open(reading: true, writing: true), "create": .create,
    "save-allowed": .save(into: oneDrive), "save-denied": .save(into: .localDrive),
    "declassify-empty": .declassify(newOwner: ""), "declassify-other": .declassify(newOwner: stranger),
    "metadata": .metadata,
]

private func cell(_ caller: String, _ object: String, _ action: String, _ rule: String, newOwner: String?? = .none) -> AccessRuleCell {
    AccessRuleCell(caller: caller, object: object, action: action, rule: rule, newOwner: newOwner)
}

/// The table's columns, in the order of `rows`.
private let columns = ["open-read", "open-write", "open-readwrite", "create", "save-allowed", "save-denied",
                       "declassify-empty", "declassify-other", "metadata"]
private let udf = "allowUserDecrypt=false"

/// Every cell, written out: per caller and object, the rule that denies each column's action
/// at `block` ("" = allowed) and the owner a create gives (`audit` records the same rules,
/// `off` allows all).
private let rows: [(caller: String, object: String, rules: [String], newOwner: String?)] = [
    ("M", "W",           ["", "", "", "", "", "saveToLocations", udf, udf, ""], work),
    ("M", "P-untagged",  ["receiveData", "", "receiveData", "", "", "", "", "", ""], work),
    ("M", "P-empty",     ["receiveData", "", "receiveData", "", "", "", "", "", ""], work),
    ("M", "P-unmanaged", ["receiveData", "", "receiveData", "", "", "", "", "", ""], work),
    ("U", "W",           ["sendData=managedApps", "sendData=managedApps", "sendData=managedApps", "workDirectory", "", "saveToLocations", udf, udf, ""], work),
    ("U", "P-untagged",  ["", "", "", "", "", "", "", "", ""], nil),
    ("U", "P-empty",     ["", "", "", "", "", "", "", "", ""], ""),
    ("U", "P-unmanaged", ["", "", "", "", "", "", "", "", ""], stranger),
]

private let table: [AccessRuleCell] = rows.flatMap { row in
    zip(columns, row.rules).map { action, rule in
        cell(row.caller, row.object, action, rule, newOwner: action == "create" ? .some(row.newOwner) : .none)
    }
}

@Suite("Access rules")
struct AccessRulesTests {
    @Test("the table covers every caller x object x action once")
    func tableIsComplete() {
        let keys = Set(table.map { "\($0.caller)|\($0.object)|\($0.action)" })
        #expect(keys.count == table.count)
        #expect(keys.count == callers.count * objects.count * actions.count)
        #expect(Set(columns) == Set(actions.keys))
    }

    @Test("every cell at protectionLevel block", arguments: table)
    func block(_ cell: AccessRuleCell) throws {
        let decision = decide(cell, level: .block)
        #expect(decision.rule == cell.rule, "\(cell)")
        #expect(decision.verdict == (cell.rule.isEmpty ? .allowed : .denied), "\(cell)")
        #expect(decision.permits == cell.rule.isEmpty)
        #expect(decision.isRecorded == !cell.rule.isEmpty)
        let expectedErrno: Int32 = cell.rule.isEmpty ? 0 : (cell.action.hasPrefix("declassify") ? EPERM : EACCES)
        #expect(decision.errno == expectedErrno, "\(cell)")
        if case .some(let owner) = cell.newOwner {
            #expect(decision.newOwner == owner, "\(cell)")
        } else {
            #expect(decision.newOwner == nil, "\(cell)")
        }
    }

    @Test("every cell at protectionLevel audit: the same rules, allowed and recorded", arguments: table)
    func audit(_ cell: AccessRuleCell) throws {
        let decision = decide(cell, level: .audit)
        #expect(decision.rule == cell.rule, "\(cell)")
        #expect(decision.verdict == (cell.rule.isEmpty ? .allowed : .allowedAudited), "\(cell)")
        #expect(decision.permits)
        #expect(decision.isRecorded == !cell.rule.isEmpty)
        if case .some(let owner) = cell.newOwner { #expect(decision.newOwner == owner, "\(cell)") }
    }

    @Test("every cell at protectionLevel off: allowed, not recorded, a create keeps the inherited owner", arguments: table)
    func off(_ cell: AccessRuleCell) throws {
        let decision = decide(cell, level: .off)
        #expect(decision == .allowed(newOwner: cell.action == "create" ? objects[cell.object]! : nil), "\(cell)")
        #expect(!decision.isRecorded)
    }

    private func decide(_ cell: AccessRuleCell, level: ProtectionLevel) -> AccessDecision {
        let policy = (try? strictPolicy(level)) ?? Policy()
        return rules(policy).decide(request(actions[cell.action]!, by: callers[cell.caller]!, owner: objects[cell.object]!))
    }

    @Test("without managedApps every process is a managed app")
    func managedAppsAbsent() {
        let policy = Policy(receiveData: .none, sendData: .managedApps, protectionLevel: .block)
        let rules = rules(policy)
        #expect(rules.isManagedApp(otherApp, forAccount: work))
        #expect(rules.decide(request(.open(reading: true, writing: false), by: otherApp, owner: work)) == .allowed())
        #expect(rules.decide(request(.create, by: otherApp, owner: "")) == .allowed(newOwner: work))
        #expect(rules.decide(request(.open(reading: true, writing: false), by: otherApp, owner: nil)).rule == "receiveData")
    }

    @Test("managedApps [] makes no process a managed app")
    func managedAppsEmpty() {
        let policy = Policy(managedApps: [], sendData: .managedApps, protectionLevel: .block)
        let rules = rules(policy)
        #expect(!rules.isManagedApp(managedApp, forAccount: work))
        let open = rules.decide(request(.open(reading: true, writing: false), by: managedApp, owner: work))
        #expect(open.verdict == .denied && open.rule == "sendData=managedApps" && open.errno == EACCES)
        #expect(rules.decide(request(.create, by: managedApp, owner: "")) == .allowed(newOwner: ""))
        #expect(rules.decide(request(.create, by: managedApp, owner: work)).rule == "workDirectory")
    }

    @Test("an account without a policy makes every process a managed app for it")
    func unmanagedAccountHasNoManagedAppRules() throws {
        let rules = rules(try strictPolicy(.block))
        #expect(rules.isManagedApp(otherApp, forAccount: stranger))
        #expect(rules.isManagedApp(otherApp, forAccount: ""))
        #expect(!rules.isManagedApp(otherApp, forAccount: work.uppercased()), "accountIds compare case-insensitively")
    }

    @Test("a sha256 rule asks the digest only when the path matches, and only once")
    func digestAskedLazily() throws {
        let digest = String(repeating: "0f", count: 32)
        let policy = Policy(managedApps: [try ManagedAppRule(path: "/opt/work/bin/", sha256: digest),
                                          try ManagedAppRule(path: "/opt/work/bin/tool", sha256: digest)],
                            sendData: .managedApps, protectionLevel: .block)
        let rules = rules(policy)

        let elsewhere = FakeExecutable("/usr/bin/cat", sha256: digest)
        #expect(rules.decide(request(.open(reading: true, writing: false), by: elsewhere, owner: work)).verdict == .denied)
        #expect(elsewhere.digestRequests == 0, "no rule matches the path: no digest")

        let genuine = FakeExecutable("/opt/work/bin/tool", sha256: digest)
        #expect(rules.decide(request(.open(reading: true, writing: false), by: genuine, owner: work)) == .allowed())
        #expect(genuine.digestRequests == 1)

        let swapped = FakeExecutable("/opt/work/bin/tool", sha256: String(repeating: "ee", count: 32))
        #expect(rules.decide(request(.open(reading: false, writing: true), by: swapped, owner: work)).rule == "sendData=managedApps")
        #expect(swapped.digestRequests == 1, "two rules match the path; the digest is computed once")

        let unreadable = FakeExecutable("/opt/work/bin/tool", sha256: nil)
        #expect(rules.decide(request(.open(reading: true, writing: false), by: unreadable, owner: work)).verdict == .denied)

        let everyone = AccessRules(evaluator: PolicyEvaluator(policies: [work: Policy(
            managedApps: policy.managedApps, sendData: .allApps, protectionLevel: .block)]))
        let any = FakeExecutable("/opt/work/bin/tool", sha256: digest)
        #expect(everyone.decide(request(.open(reading: true, writing: false), by: any, owner: work)) == .allowed())
        #expect(any.digestRequests == 0, "sendData allApps needs no managed-app check")
        #expect(everyone.decide(request(.metadata, by: any, owner: work)) == .allowed())
        #expect(any.digestRequests == 0)
    }

    @Test("a managed app opening a personal file: receiveData first, then openFromLocations of its location")
    func receiveAndOpenFrom() throws {
        let app = [try ManagedAppRule(path: managedAppPath)]
        let onlyOneDrive = rules(Policy(receiveData: .all, openFromLocations: [.oneDriveForBusiness],
                                        managedApps: app, protectionLevel: .block))
        let local = onlyOneDrive.decide(request(.open(reading: true, writing: false), by: managedApp, owner: nil, location: .localDrive))
        #expect(local.verdict == .denied && local.rule == "openFromLocations" && local.errno == EACCES)
        #expect(onlyOneDrive.decide(request(.open(reading: true, writing: false), by: managedApp, owner: nil, location: oneDrive)) == .allowed())
        #expect(onlyOneDrive.decide(request(.open(reading: true, writing: false), by: otherApp, owner: nil, location: .localDrive)) == .allowed(),
                "a process that is not a managed app does not bring data into the account")
        #expect(onlyOneDrive.decide(request(.open(reading: false, writing: true), by: managedApp, owner: "", location: .localDrive)) == .allowed(),
                "writing a personal file needs no open-from check")

        let nothingIn = rules(Policy(receiveData: .none, openFromLocations: [.oneDriveForBusiness],
                                     managedApps: app, protectionLevel: .block))
        #expect(nothingIn.decide(request(.open(reading: true, writing: false), by: managedApp, owner: stranger, location: .localDrive)).rule == "receiveData")
        #expect(nothingIn.decide(request(.open(reading: true, writing: false), by: managedApp, owner: "", location: oneDrive)).rule == "receiveData")

        let anywhere = rules(Policy(receiveData: .all, managedApps: app, protectionLevel: .block))
        #expect(anywhere.decide(request(.open(reading: true, writing: false), by: managedApp, owner: stranger, location: .localDrive)) == .allowed())

        let audited = rules(Policy(receiveData: .all, openFromLocations: [], managedApps: app, protectionLevel: .audit))
            .decide(request(.open(reading: true, writing: false), by: managedApp, owner: nil, location: .other))
        #expect(audited.verdict == .allowedAudited && audited.rule == "openFromLocations")
    }

    @Test("a personal file opened for an app account that is not managed is never checked")
    func personalFileWithoutManagedAppAccount() throws {
        let rules = rules(try strictPolicy(.block))
        #expect(rules.decide(request(.open(reading: true, writing: false), by: managedApp, owner: nil, appAccount: "")) == .allowed())
        #expect(rules.decide(request(.open(reading: true, writing: false), by: managedApp, owner: "", appAccount: stranger)) == .allowed())
    }

    @Test("sendData allApps lets every process open work files; managedApps only managed apps")
    func sendData() throws {
        let app = [try ManagedAppRule(path: managedAppPath)]
        let all = rules(Policy(managedApps: app, sendData: .allApps, protectionLevel: .block))
        let managedOnly = rules(Policy(managedApps: app, sendData: .managedApps, protectionLevel: .block))
        for writing in [false, true] {
            #expect(all.decide(request(.open(reading: !writing, writing: writing), by: otherApp, owner: work)) == .allowed())
            #expect(all.decide(request(.open(reading: !writing, writing: writing), by: managedApp, owner: work)) == .allowed())
            #expect(managedOnly.decide(request(.open(reading: !writing, writing: writing), by: managedApp, owner: work.uppercased())) == .allowed())
            #expect(managedOnly.decide(request(.open(reading: !writing, writing: writing), by: otherApp, owner: work))
                    == AccessDecision(verdict: .denied, rule: "sendData=managedApps", newOwner: nil, errno: EACCES))
        }
    }

    @Test("declassify to the owner itself is no declassification; allowUserDecrypt true allows every one")
    func declassifySameOwner() throws {
        let strict = rules(try strictPolicy(.block))
        #expect(strict.decide(request(.declassify(newOwner: work.uppercased()), by: otherApp, owner: work)) == .allowed())
        let permissive = rules(Policy(allowUserDecrypt: true, protectionLevel: .block))
        #expect(permissive.decide(request(.declassify(newOwner: ""), by: otherApp, owner: work)) == .allowed())
    }

    @Test("a create for an app account that is not managed: the work directory's policy decides")
    func createWithoutManagedAppAccount() throws {
        let rules = rules(try strictPolicy(.block))
        let byOther = rules.decide(request(.create, by: otherApp, owner: work, appAccount: ""))
        #expect(byOther == AccessDecision(verdict: .denied, rule: "workDirectory", newOwner: work, errno: EACCES))
        #expect(rules.decide(request(.create, by: managedApp, owner: work, appAccount: "")) == .allowed(newOwner: work))
        #expect(rules.decide(request(.create, by: otherApp, owner: "", appAccount: "")) == .allowed(newOwner: ""))
        #expect(rules.decide(request(.create, by: otherApp, owner: nil, appAccount: stranger)) == .allowed(newOwner: nil))
    }

    @Test("the audit names of actions and verdicts")
    func auditNames() {
        #expect(AccessAction.open(reading: true, writing: false).auditName == "open-read")
        #expect(AccessAction.open(reading: false, writing: true).auditName == "open-write")
        #expect(AccessAction.declassify(newOwner: "").auditName == "declassify")
        #expect(AccessAction.save(into: .other).auditName == "save")
        #expect([Verdict.allowed, .denied, .allowedAudited].map(\.auditName) == ["allowed", "denied", "audited"])
    }
}
