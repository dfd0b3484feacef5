import Foundation
import Testing

@Suite("CLI: init, state directory, enroll, accounts, policy")
struct StateAndAccountTests {
    @Test("init creates state.db and a 0600 master key in a 0700 directory; a second init exits 73")
    func initCreatesState() throws {
        let sandbox = try Sandbox()
        let first = try sandbox.run(["init"])
        #expect(first.status == 0, "\(first.err)")
        #expect(sandbox.exists(sandbox.state + "/state.db"))
        let keyAttributes = try FileManager.default.attributesOfItem(atPath: sandbox.state + "/master.key")
        #expect((keyAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((keyAttributes[.size] as? NSNumber)?.intValue ?? 0 >= 32)
        let dirAttributes = try FileManager.default.attributesOfItem(atPath: sandbox.state)
        #expect((dirAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        let again = try sandbox.run(["init"])
        #expect(again.status == 73)
        #expect(again.errLines.count == 1)
        #expect(again.err.hasPrefix("mamfs: init: "))
    }

    @Test("a verb without a state directory exits 66 and says to run init")
    func missingState() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.run(["accounts"])
        #expect(result.status == 66)
        #expect(result.errLines.count == 1)
        #expect(result.err.hasPrefix("mamfs: accounts: "))
        #expect(result.err.contains(sandbox.state))
        #expect(result.err.contains("mamfs init"))
    }

    @Test("state resolution: $MAMFS_STATE, then $XDG_DATA_HOME/mamfs, then ~/.local/share/mamfs")
    func stateResolution() throws {
        let sandbox = try Sandbox()
        let viaEnvironment = sandbox.path("env-state")
        #expect(try sandbox.run(["init"], withState: false, environment: ["MAMFS_STATE": viaEnvironment]).status == 0)
        #expect(sandbox.exists(viaEnvironment + "/state.db"))

        let xdg = sandbox.path("xdg")
        #expect(try sandbox.run(["init"], withState: false, environment: ["XDG_DATA_HOME": xdg]).status == 0)
        #expect(sandbox.exists(xdg + "/mamfs/state.db"))

        #expect(try sandbox.run(["init"], withState: false).status == 0)
        #expect(sandbox.exists(sandbox.path("home/.local/share/mamfs/state.db")))

        // --state wins over the environment.
        let explicit = try sandbox.run(["accounts", "--json"], environment: ["MAMFS_STATE": viaEnvironment])
        #expect(explicit.status == 66)
    }

    @Test("a passphrase-derived state opens with the right passphrase file and exits 77 with a wrong one")
    func passphrase() throws {
        let sandbox = try Sandbox()
        let right = try sandbox.write("pass", "correct horse battery staple\n")
        let wrong = try sandbox.write("wrong", "incorrect horse\n")
        let initRun = try sandbox.run(["init", "--passphrase-file", right])
        #expect(initRun.status == 0, "\(initRun.err)")
        #expect(!sandbox.exists(sandbox.state + "/master.key"))
        let good = try sandbox.run(["accounts", "--json"], environment: ["MAMFS_PASSPHRASE_FILE": right])
        #expect(good.status == 0, "\(good.err)")
        #expect(try jsonArray(good).isEmpty)
        let bad = try sandbox.run(["accounts"], environment: ["MAMFS_PASSPHRASE_FILE": wrong])
        #expect(bad.status == 77)
        #expect(bad.errLines.count == 1)
        let missing = try sandbox.run(["init", "--passphrase-file", sandbox.path("nope")], withState: false,
                                      environment: ["MAMFS_STATE": sandbox.path("other")])
        #expect(missing.status == 66)
        #expect(missing.err.contains(sandbox.path("nope")))
    }

    @Test("enroll registers a managed account; accounts --json has accountId, upn, tenantId, managed, registered and wiped")
    func enrollAndList() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        let enroll = try sandbox.run(["enroll", Fixtures.account.uppercased(), "--upn", "Demo@Contoso.COM", "--policy", policy])
        #expect(enroll.status == 0, "\(enroll.err)")
        let list = try sandbox.run(["accounts", "--json"])
        #expect(list.status == 0)
        let accounts = try jsonArray(list)
        #expect(accounts.count == 1)
        #expect(Set(accounts[0].keys) == ["accountId", "upn", "tenantId", "managed", "registered", "wiped"])
        #expect(accounts[0]["tenantId"] is NSNull)
        #expect(accounts[0]["wiped"] is NSNull)
        #expect(accounts[0]["registered"] as? Bool == true)
        #expect(accounts[0]["accountId"] as? String == Fixtures.account)
        #expect(accounts[0]["upn"] as? String == Fixtures.upn)
        #expect(accounts[0]["managed"] as? Bool == true)
        let human = try sandbox.run(["accounts"])
        #expect(human.out.contains(Fixtures.account))
        #expect(human.out.contains(Fixtures.upn))
    }

    @Test("a second managed account is refused; an invalid accountId is a usage error")
    func oneManagedAccount() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let policy = try sandbox.write("p2.json", Fixtures.plainPolicy)
        let second = try sandbox.run(["enroll", Fixtures.otherAccount, "--policy", policy])
        #expect(second.status == 64)
        #expect(second.errLines.count == 1)
        #expect(second.err.contains("one managed account"))
        let notGuid = try sandbox.run(["enroll", "not-a-guid", "--policy", policy])
        #expect(notGuid.status == 64)
    }

    @Test("enroll with a missing policy file exits 66; with an invalid one 64, naming the file and key")
    func badPolicyFiles() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.run(["init"]).status == 0)
        let missing = sandbox.path("missing.json")
        let noFile = try sandbox.run(["enroll", Fixtures.account, "--policy", missing])
        #expect(noFile.status == 66)
        #expect(noFile.err == "mamfs: enroll: \(missing): no such file\n")
        let invalid = try sandbox.write("bad.json", #"{"fileEncryptionRequired": 1}"#)
        let badType = try sandbox.run(["enroll", Fixtures.account, "--policy", invalid])
        #expect(badType.status == 64)
        #expect(badType.errLines.count == 1)
        #expect(badType.err.contains(invalid))
        #expect(badType.err.contains("fileEncryptionRequired"))
        let unknownKey = try sandbox.write("unknown.json", #"{"encryptEverything": true}"#)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--policy", unknownKey]).status == 64)
    }

    @Test("policy set then policy show --json gives the new policy; show by UPN in any case")
    func policyRoundTrip() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let before = try sandbox.run(["policy", "show", "DEMO@contoso.com", "--json"])
        #expect(before.status == 0, "\(before.err)")
        let beforeObject = try JSONSerialization.jsonObject(with: before.stdout) as? [String: Any]
        #expect(beforeObject?["fileEncryptionRequired"] as? Bool == true)
        #expect(beforeObject?["receiveData"] as? String == "managedOnly")

        let plain = try sandbox.write("plain.json", Fixtures.plainPolicy)
        let set = try sandbox.run(["policy", "set", Fixtures.account, plain])
        #expect(set.status == 0, "\(set.err)")
        let after = try sandbox.run(["policy", "show", Fixtures.upn, "--json"])
        let object = try JSONSerialization.jsonObject(with: after.stdout) as? [String: Any]
        #expect(object?["fileEncryptionRequired"] as? Bool == false)
        #expect(object?["fileProviderEncryptFiles"] as? Bool == false)
        #expect(object?["receiveData"] as? String == "all")
        #expect(object?["saveToLocations"] as? [String] == ["Other"])
        #expect(object?["openFromLocations"] as? [String] == ["Other", "Photos"])
        let human = try sandbox.run(["policy", "show", Fixtures.upn])
        #expect(human.status == 0)
        #expect(human.out.contains("fileEncryptionRequired:"))
        #expect(human.out.contains("Other, Photos"))
    }

    @Test("policy of an unknown account exits 77; of an unenrolled one 77")
    func policyDenied() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let unknown = try sandbox.run(["policy", "show", "nobody@contoso.com"])
        #expect(unknown.status == 77)
        #expect(unknown.errLines == ["mamfs: policy show: unknown account: 'nobody@contoso.com' is not registered (see 'mamfs accounts')"])
        #expect(try sandbox.run(["unenroll", Fixtures.upn]).status == 0)
        let unenrolled = try sandbox.run(["policy", "show", Fixtures.upn])
        #expect(unenrolled.status == 77)
        let accounts = try jsonArray(try sandbox.run(["accounts", "--json"]))
        #expect(accounts.first?["managed"] as? Bool == false)
    }
}
