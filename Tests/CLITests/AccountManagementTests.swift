import Foundation
import Testing
import MAMTestSupport

/// `mamfs audit --json` records of `action`.
private func auditRecords(_ sandbox: Sandbox, action: String) throws -> [[String: Any]] {
    let result = try sandbox.run(["audit", "--json"])
    #expect(result.status == 0, "\(result.err)")
    return try jsonArray(result).filter { $0["action"] as? String == action }
}

/// `mamfs accounts --json` (plus `extra`), by UPN.
private func accountsByUPN(_ sandbox: Sandbox, _ extra: [String] = []) throws -> [String: [String: Any]] {
    let result = try sandbox.run(["accounts", "--json"] + extra)
    #expect(result.status == 0, "\(result.err)")
    var byUPN: [String: [String: Any]] = [:]
    for object in try jsonArray(result) { byUPN[object["upn"] as? String ?? ""] = object }
    return byUPN
}

private let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"

@Suite("CLI: allowed accounts, enroll by UPN, homeAccountId, deregistration, verify-protect, can-receive")
struct AccountManagementTests {
    @Test("accounts allow sets the list (lowercased), allowed shows it as lines and JSON, --clear removes it")
    func allowedList() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let unset = try sandbox.run(["accounts", "allowed", "--json"])
        #expect(unset.status == 0, "\(unset.err)")
        #expect((try JSONSerialization.jsonObject(with: unset.stdout) as? [String: [String]]) == ["allowedAccounts": []])
        #expect(try sandbox.run(["accounts", "allowed"]).out == "Every account is allowed.\n")

        let set = try sandbox.run(["accounts", "allow", "Ann@Contoso.COM", Fixtures.account.uppercased(), "ann@contoso.com"])
        #expect(set.status == 0, "\(set.err)")
        #expect(try sandbox.run(["accounts", "allowed"]).out == "ann@contoso.com\n\(Fixtures.account)\n")
        let json = try sandbox.run(["accounts", "allowed", "--json"])
        #expect((try JSONSerialization.jsonObject(with: json.stdout) as? [String: [String]])
                == ["allowedAccounts": ["ann@contoso.com", Fixtures.account]])

        let bad = try sandbox.run(["accounts", "allow", "not an account"])
        #expect(bad.status == 64)
        #expect(bad.errLines.count == 1)
        #expect(try sandbox.run(["accounts", "allow"]).status == 64)
        #expect(try sandbox.run(["accounts", "allow", "--clear", "x@y.z"]).status == 64)

        #expect(try sandbox.run(["accounts", "allow", "--clear"]).status == 0)
        #expect(try sandbox.run(["accounts", "allowed"]).out == "Every account is allowed.\n")
    }

    @Test("with an allowed list, enroll of another account exits 77 with one line and a denied audit record; a listed UPN in any case enrolls")
    func enrollRefused() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        #expect(try sandbox.run(["accounts", "allow", "DEMO@contoso.com"]).status == 0)

        let refused = try sandbox.run(["enroll", Fixtures.otherAccount, "--upn", "bob@contoso.com", "--policy", policy])
        #expect(refused.status == 77)
        #expect(refused.errLines == ["mamfs: enroll: bob@contoso.com: denied: not in the allowed accounts (see 'mamfs accounts allowed')"])
        #expect(try jsonArray(try sandbox.run(["accounts", "--json"])).isEmpty)
        let denied = try auditRecords(sandbox, action: "enroll")
        #expect(denied.count == 1)
        #expect(denied.first?["decision"] as? String == "denied")
        #expect(denied.first?["rule"] as? String == "allowedAccounts")
        #expect(denied.first?["path"] as? String == "bob@contoso.com")

        let byIdOnly = try sandbox.run(["enroll", Fixtures.account, "--policy", policy])
        #expect(byIdOnly.status == 77, "an accountId the list does not name, its UPN unknown")

        let allowed = try sandbox.run(["enroll", Fixtures.account, "--upn", "Demo@Contoso.com", "--policy", policy])
        #expect(allowed.status == 0, "\(allowed.err)")
        #expect(try accountsByUPN(sandbox)["demo@contoso.com"]?["managed"] as? Bool == true)
    }

    @Test("with an allowed list, protect and mount --account refuse another account (77, audited); '' and a listed account pass")
    func protectAndMountRefused() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        #expect(try sandbox.run(["accounts", "allow", Fixtures.upn]).status == 0)
        let file = try sandbox.write("work/a.txt", "alpha\n")

        let protect = try sandbox.run(["protect", file, "--account", Fixtures.otherAccount])
        #expect(protect.status == 77)
        #expect(protect.errLines == ["mamfs: protect: \(Fixtures.otherAccount): denied: not in the allowed accounts (see 'mamfs accounts allowed')"])
        #expect(try sandbox.read(file) == Data("alpha\n".utf8), "the file is untouched")
        let protectDenied = try auditRecords(sandbox, action: "protect").filter { $0["decision"] as? String == "denied" }
        #expect(protectDenied.count == 1)
        #expect(protectDenied.first?["owner"] as? String == Fixtures.otherAccount)
        #expect(protectDenied.first?["rule"] as? String == "allowedAccounts")

        #expect(try sandbox.run(["protect", file, "--account", Fixtures.account]).status == 0, "the listed account by its accountId")
        #expect(try sandbox.run(["protect", file, "--account", ""]).status == 0, "unmanaged is always allowed")

        let backing = sandbox.path("work")
        let mountpoint = sandbox.path("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        defer { MountTests.forceUnmount(mountpoint) }
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", "eve@contoso.com"])
        #expect(mount.status == 77)
        #expect(mount.errLines == ["mamfs: mount: eve@contoso.com: denied: not in the allowed accounts (see 'mamfs accounts allowed')"])
        let mounts = try String(contentsOfFile: "/proc/mounts", encoding: .utf8)
        #expect(!mounts.contains(mountpoint), "nothing was mounted")
        let mountDenied = try auditRecords(sandbox, action: "mount")
        #expect(mountDenied.count == 1)
        #expect(mountDenied.first?["decision"] as? String == "denied")
    }

    @Test("enroll --upn alone keys the account by UPN; protect by UPN encrypts; a later enroll naming both records the accountId")
    func enrollByUPN() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        let enroll = try sandbox.run(["enroll", "--upn", "Ann@Contoso.com", "--policy", policy])
        #expect(enroll.status == 0, "\(enroll.err)")
        #expect(enroll.out == "Enrolled ann@contoso.com as the managed account (policy from \(policy))\n")
        var ann = try accountsByUPN(sandbox)["ann@contoso.com"]
        #expect(ann?["accountId"] is NSNull)
        #expect(ann?["managed"] as? Bool == true)

        let file = try sandbox.write("work/a.txt", "annual plan\n")
        #expect(try sandbox.run(["protect", file, "--account", "ANN@contoso.com"]).status == 0)
        #expect(!(try sandbox.read(file)).contains("annual plan"), "encrypted on disk")
        #expect(try jsonArray(try sandbox.run(["info", "--json", file])).first?["owner"] as? String == "ann@contoso.com")
        #expect(try sandbox.run(["policy", "show", "ann@contoso.com"]).status == 0)
        #expect(try sandbox.run(["verify-protect", file, "--account", "ann@contoso.com"]).status == 0)

        let known = try sandbox.run(["enroll", Fixtures.account, "--upn", "ann@contoso.com", "--policy", policy])
        #expect(known.status == 0, "\(known.err)")
        ann = try accountsByUPN(sandbox)["ann@contoso.com"]
        #expect(ann?["accountId"] as? String == Fixtures.account)
        #expect(try jsonArray(try sandbox.run(["accounts", "--json"])).count == 1, "the same account, not a second one")
        // The accountId now names the account; the file written before stays readable.
        #expect(try sandbox.run(["verify-protect", file, "--account", Fixtures.account.uppercased()]).status == 0)
        let plain = try sandbox.run(["decrypt", file, "-o", "-"])
        #expect(plain.status == 0, "\(plain.err)")
        #expect(plain.out == "annual plan\n")
    }

    @Test("enroll by UPN alone still exits 64 for a malformed UPN and without ACCOUNT or --upn")
    func enrollByUPNErrors() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        #expect(try sandbox.run(["enroll", "--upn", "not-a-upn", "--policy", policy]).status == 64)
        let neither = try sandbox.run(["enroll", "--policy", policy])
        #expect(neither.status == 64)
        #expect(neither.err.contains("--upn"))
    }

    @Test("a homeAccountId OID.TID enrolls (tenant recorded) and names the account everywhere; another tenant is refused")
    func homeAccountId() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        let home = "\(Fixtures.account.uppercased()).\(tenant.uppercased())"
        let enroll = try sandbox.run(["enroll", home, "--upn", Fixtures.upn, "--policy", policy])
        #expect(enroll.status == 0, "\(enroll.err)")
        let record = try accountsByUPN(sandbox)[Fixtures.upn]
        #expect(record?["accountId"] as? String == Fixtures.account)
        #expect(record?["tenantId"] as? String == tenant)

        let file = try sandbox.write("work/a.txt", "alpha\n")
        #expect(try sandbox.run(["protect", file, "--account", home]).status == 0)
        #expect(try jsonArray(try sandbox.run(["info", "--json", file])).first?["owner"] as? String == Fixtures.account)
        #expect(try sandbox.run(["policy", "show", home]).status == 0)
        #expect(try sandbox.run(["verify-protect", file, "--account", home]).status == 0)

        let otherTenant = "\(Fixtures.account).\(Fixtures.otherAccount)"
        let wrong = try sandbox.run(["policy", "show", otherTenant])
        #expect(wrong.status == 77)
        #expect(wrong.err.contains("tenant"))
        let malformed = try sandbox.run(["protect", file, "--account", "\(Fixtures.account).1234"])
        #expect(malformed.status == 64)
        #expect(malformed.err.contains("OID.TID"))
    }

    @Test("unenroll deregisters unless --keep-registered; accounts --enrolled lists only enrolled accounts (text and JSON)")
    func unenrollAndEnrolledList() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        var list = try accountsByUPN(sandbox)
        #expect(list[Fixtures.upn]?["registered"] as? Bool == true)
        #expect(try jsonArray(try sandbox.run(["accounts", "--enrolled", "--json"])).count == 1)

        let kept = try sandbox.run(["unenroll", Fixtures.upn, "--keep-registered"])
        #expect(kept.status == 0, "\(kept.err)")
        list = try accountsByUPN(sandbox)
        #expect(list[Fixtures.upn]?["managed"] as? Bool == false)
        #expect(list[Fixtures.upn]?["registered"] as? Bool == true)
        #expect(try jsonArray(try sandbox.run(["accounts", "--enrolled", "--json"])).isEmpty)
        #expect(try sandbox.run(["accounts", "--enrolled"]).out == "No enrolled accounts.\n")

        let policy = try sandbox.write("p2.json", Fixtures.encryptingPolicy)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--policy", policy]).status == 0)
        let enrolledText = try sandbox.run(["accounts", "--enrolled"])
        #expect(enrolledText.out.contains(Fixtures.account))
        let deregistered = try sandbox.run(["unenroll", Fixtures.account])
        #expect(deregistered.status == 0, "\(deregistered.err)")
        #expect(deregistered.out == "Unenrolled and deregistered \(Fixtures.account)\n")
        list = try accountsByUPN(sandbox)
        #expect(list[Fixtures.upn]?["registered"] as? Bool == false)
        #expect(list[Fixtures.upn]?["managed"] as? Bool == false)
        let keys = Set(list[Fixtures.upn]?.keys.map { $0 } ?? [])
        #expect(keys == ["accountId", "upn", "tenantId", "managed", "registered", "wiped"])
        // Still known, so a later wipe finds it.
        #expect(try sandbox.run(["wipe", Fixtures.account]).status == 0)
    }

    @Test("verify-protect: 0 for the owner, 77 with one line for another account, an untagged or unencrypted file; 66 for a missing one")
    func verifyProtect() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("work/a.txt", "alpha\n")
        let untagged = try sandbox.run(["verify-protect", file])
        #expect(untagged.status == 77)
        #expect(untagged.errLines == ["mamfs: verify-protect: \(file): not protected (untagged)"])

        #expect(try sandbox.run(["protect", file, "--account", Fixtures.upn]).status == 0)
        let mine = try sandbox.run(["verify-protect", file, "--account", Fixtures.upn.uppercased()])
        #expect(mine.status == 0, "\(mine.err)")
        #expect(mine.out == "\(file): protected for \(Fixtures.account)\n")
        #expect(try sandbox.run(["verify-protect", file]).status == 0, "for its owner")
        let other = try sandbox.run(["verify-protect", file, "--account", Fixtures.otherAccount])
        #expect(other.status == 77)
        #expect(other.errLines == ["mamfs: verify-protect: \(file): not protected for \(Fixtures.otherAccount) (owned by \(Fixtures.account))"])

        // Tagged for the account but stored plain although its policy requires encryption.
        let plainPolicy = try sandbox.write("plain.json", Fixtures.plainPolicy)
        let plainFile = try sandbox.write("work/b.txt", "beta\n")
        #expect(try sandbox.run(["policy", "set", Fixtures.account, plainPolicy]).status == 0)
        #expect(try sandbox.run(["protect", plainFile, "--account", Fixtures.account]).status == 0)
        #expect(try sandbox.run(["verify-protect", plainFile]).status == 0, "plain is what its policy asks")
        let encryptPolicy = try sandbox.write("enc.json", Fixtures.encryptingPolicy)
        #expect(try sandbox.run(["policy", "set", Fixtures.account, encryptPolicy]).status == 0)
        let unencrypted = try sandbox.run(["verify-protect", plainFile])
        #expect(unencrypted.status == 77)
        #expect(unencrypted.err.contains("not encrypted"))

        #expect(try sandbox.run(["verify-protect", sandbox.path("work/missing")]).status == 66)
    }

    @Test("can-receive: receiveData for the owner and openFromLocations for the location decide; 77 names the key")
    func canReceive() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let inbox = sandbox.path("inbox")
        let policy = try sandbox.write("p.json", """
            {"fileEncryptionRequired": true, "receiveData": "managedOnly",
             "openFromLocations": ["AccountDocument", "OneDriveForBusiness"],
             "locations": {"OneDriveForBusiness": ["\(inbox)"]}}
            """)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--upn", Fixtures.upn, "--policy", policy]).status == 0)
        let personal = try sandbox.write("inbox/personal.txt", "personal\n")
        #expect(try sandbox.run(["protect", personal, "--account", ""]).status == 0)
        let work = try sandbox.write("inbox/work.txt", "work\n")
        #expect(try sandbox.run(["protect", work, "--account", Fixtures.account]).status == 0)
        let local = try sandbox.write("desk/notes.txt", "notes\n")
        #expect(try sandbox.run(["protect", local, "--account", Fixtures.account]).status == 0)
        let foreign = try sandbox.write("desk/foreign.txt", "foreign\n")
        #expect(try sandbox.run(["protect", foreign, "--account", Fixtures.otherAccount]).status == 0)

        let refusedOwner = try sandbox.run(["can-receive", personal, "--account", Fixtures.upn])
        #expect(refusedOwner.status == 77)
        #expect(refusedOwner.errLines == ["mamfs: can-receive: \(personal): denied by policy (receiveData): \(Fixtures.upn) may not receive a file owned by the unmanaged identity"])
        let own = try sandbox.run(["can-receive", work, "--account", Fixtures.upn])
        #expect(own.status == 0, "\(own.err)")
        let ownLocal = try sandbox.run(["can-receive", local, "--account", Fixtures.account])
        #expect(ownLocal.status == 0, "its own file, wherever it is")
        let refusedLocation = try sandbox.run(["can-receive", foreign, "--account", Fixtures.account])
        #expect(refusedLocation.status == 77)
        #expect(refusedLocation.err.contains("receiveData"), "an unmanaged owner under managedOnly")

        // receiveData all: the location decides.
        let all = try sandbox.write("all.json", """
            {"fileEncryptionRequired": true, "receiveData": "all",
             "openFromLocations": ["OneDriveForBusiness"], "locations": {"OneDriveForBusiness": ["\(inbox)"]}}
            """)
        #expect(try sandbox.run(["policy", "set", Fixtures.account, all]).status == 0)
        #expect(try sandbox.run(["can-receive", personal, "--account", Fixtures.account]).status == 0, "from OneDriveForBusiness")
        let fromLocal = try sandbox.run(["can-receive", foreign, "--account", Fixtures.account])
        #expect(fromLocal.status == 77)
        #expect(fromLocal.errLines == ["mamfs: can-receive: \(foreign): denied by policy (openFromLocations): \(Fixtures.account) may not receive a file in LocalDrive"])
        #expect(try sandbox.run(["can-receive", foreign, "--account", Fixtures.otherAccount]).status == 0, "an unmanaged receiver")
        #expect(try sandbox.run(["can-receive", foreign]).status == 64)
    }
}
