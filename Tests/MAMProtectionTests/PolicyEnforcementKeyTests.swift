import Foundation
import Testing
@testable import MAMProtection

private func parse(_ text: String) throws -> Policy {
    try Policy.parse(Data(text.utf8), source: "apps.json")
}

private func rejection(_ text: String) -> String? {
    do {
        _ = try parse(text)
        return nil
    } catch let MAMError.invalidArguments(message) {
        return message
    } catch {
        return nil
    }
}

private let digest = String(repeating: "ab", count: 32)

@Suite("Policy enforcement keys")
struct PolicyEnforcementKeyTests {
    @Test("without the enforcement keys: every process managed, all apps, decrypt allowed, no locations, level off")
    func defaults() throws {
        let policy = try parse("{}")
        #expect(policy.managedApps == nil)
        #expect(policy.sendData == .allApps)
        #expect(policy.allowUserDecrypt == true)
        #expect(policy.locations.isEmpty)
        #expect(policy.protectionLevel == .off)
        #expect(!String(decoding: policy.jsonData(), as: UTF8.self).contains("sendData"), "defaults are not written")
    }

    @Test("every enforcement key is read, and the policy round-trips through jsonData")
    func fullPolicy() throws {
        let policy = try parse("""
        {"managedApps": [{"path": "/usr/bin/soffice"}, {"path": "/opt/work/bin/", "sha256": "\(digest.uppercased())"}],
         "sendData": "managedapps", "allowUserDecrypt": false, "protectionLevel": "Block",
         "locations": {"OneDriveForBusiness": ["/home/ann/OneDrive"], "SharePoint": ["/srv/share/", "/mnt/sp/"]}}
        """)
        #expect(policy.managedApps == [try ManagedAppRule(path: "/usr/bin/soffice"), try ManagedAppRule(path: "/opt/work/bin/", sha256: digest)])
        #expect(policy.managedApps?[1].sha256 == digest, "digests are kept lowercased")
        #expect(policy.sendData == .managedApps)
        #expect(policy.allowUserDecrypt == false)
        #expect(policy.protectionLevel == .block)
        #expect(policy.locations.table == ["OneDriveForBusiness": ["/home/ann/OneDrive/"], "SharePoint": ["/mnt/sp/", "/srv/share/"]])
        let again = try Policy.parse(policy.jsonData(), source: "again")
        #expect(again == policy)
        #expect(again.jsonData() == policy.jsonData())
    }

    @Test("an empty managedApps list means no process is a managed app (kept apart from the key's absence)")
    func emptyManagedApps() throws {
        let policy = try parse(#"{"managedApps": []}"#)
        #expect(policy.managedApps == [])
        #expect(try Policy.parse(policy.jsonData(), source: "again").managedApps == [])
    }

    @Test("bad enforcement values are rejected with the key named", arguments: [
        (#"{"sendData": "some"}"#, "key 'sendData': 'some' is not one of allApps, managedApps"),
        (#"{"sendData": true}"#, "key 'sendData': expected a string, got a boolean"),
        (#"{"protectionLevel": "warn"}"#, "key 'protectionLevel': 'warn' is not one of block, audit, off"),
        (#"{"allowUserDecrypt": 0}"#, "key 'allowUserDecrypt': expected true or false, got a number"),
        (#"{"managedApps": "/usr/bin/x"}"#, "key 'managedApps': expected an array"),
        (#"{"managedApps": ["/usr/bin/x"]}"#, "key 'managedApps': element 0 must be an object, got a string"),
        (#"{"managedApps": [{"sha256": "00"}]}"#, "key 'managedApps': element 0: 'path' must be a string, got nothing"),
        (#"{"managedApps": [{"path": "bin/x"}]}"#, "must be absolute"),
        (#"{"managedApps": [{"path": "/usr/../bin/x"}]}"#, "must be normalised"),
        (#"{"managedApps": [{"path": "/usr/bin/x", "sha256": "12"}]}"#, "must be 64 hex digits"),
        (#"{"managedApps": [{"path": "/usr/bin/x", "hash": "12"}]}"#, "unknown key 'hash'"),
        (#"{"managedApps": [{"path": "/usr/bin/x"}, {"path": "/usr/bin/x"}]}"#, "element 1 repeats '/usr/bin/x'"),
        (#"{"locations": ["/x"]}"#, "key 'locations': expected an object"),
        (#"{"locations": {"Moon": ["/x"]}}"#, "'Moon' is not a location name"),
        (#"{"locations": {"Box": "/x"}}"#, "'Box' must be an array of path prefixes"),
        (#"{"locations": {"Box": ["x"]}}"#, "must be absolute"),
        (#"{"locations": {"Box": ["/x"], "Dropbox": ["/x/"]}}"#, "is listed under Box and Dropbox"),
    ])
    func rejected(json: String, message: String) {
        let got = rejection(json)
        #expect(got?.contains(message) == true, "\(got ?? "accepted")")
        #expect(got?.hasPrefix("policy apps.json: ") == true)
    }

    @Test("a path rule matches that executable only; a directory rule everything below it")
    func ruleMatching() throws {
        let file = try ManagedAppRule(path: "/usr/bin/soffice")
        let directory = try ManagedAppRule(path: "/opt/work/")
        #expect(file.matches(executablePath: "/usr/bin/soffice") { nil })
        #expect(!file.matches(executablePath: "/usr/bin/soffice.bin") { nil })
        #expect(!file.matches(executablePath: "/usr/bin") { nil })
        #expect(directory.matches(executablePath: "/opt/work/bin/tool") { nil })
        #expect(!directory.matches(executablePath: "/opt/work/") { nil })
        #expect(!directory.matches(executablePath: "/opt/workers/tool") { nil })
    }

    @Test("a digest rule needs the executable's digest; it is computed once, only when a rule asks")
    func digestMatching() throws {
        let rules = [try ManagedAppRule(path: "/usr/bin/a"), try ManagedAppRule(path: "/usr/bin/", sha256: digest),
                     try ManagedAppRule(path: "/usr/", sha256: digest)]
        var computed = 0
        #expect(rules.matches(executablePath: "/usr/bin/a") { computed += 1; return nil })
        #expect(computed == 0, "a path-only match asks for no digest")
        #expect(rules.matches(executablePath: "/usr/bin/b") { computed += 1; return digest })
        #expect(computed == 1)
        computed = 0
        #expect(!rules.matches(executablePath: "/usr/bin/b") { computed += 1; return String(repeating: "0", count: 64) })
        #expect(computed == 1, "two digest rules, one digest")
        #expect(!rules.matches(executablePath: "/usr/bin/b") { nil }, "an unreadable executable matches no digest rule")
    }

    @Test("locations: the longest listed prefix wins, a prefix matches itself as a directory, the rest is LocalDrive")
    func locationOfPath() throws {
        let locations = try StorageLocations(["OneDriveForBusiness": ["/home/ann/OneDrive"], "SharePoint": ["/home/ann/OneDrive/Shared/"]])
        let oneDrive = try #require(StorageLocation(named: "OneDriveForBusiness"))
        let sharePoint = try #require(StorageLocation(named: "sharepoint"))
        #expect(locations.location(ofPath: "/home/ann/OneDrive/a.docx") == oneDrive)
        #expect(locations.location(ofPath: "/home/ann/OneDrive") == oneDrive)
        #expect(locations.location(ofPath: "/home/ann/OneDrive/Shared/b.docx") == sharePoint)
        #expect(locations.location(ofPath: "/home/ann/OneDriveX/c") == .localDrive)
        #expect(locations.location(ofPath: "/tmp/c") == .localDrive)
        #expect(StorageLocations().location(ofPath: "/anything") == .localDrive)
    }

    @Test("uniform location below a directory: one location for all of it, nil when a prefix lies inside it")
    func uniformLocationBelowDirectory() throws {
        let locations = try StorageLocations(["OneDriveForBusiness": ["/home/ann/OneDrive"], "SharePoint": ["/home/ann/OneDrive/Shared/"]])
        let oneDrive = try #require(StorageLocation(named: "OneDriveForBusiness"))
        let sharePoint = try #require(StorageLocation(named: "sharepoint"))
        #expect(locations.uniformLocation(below: "/home/ann/OneDrive") == nil, "Shared/ lies inside it")
        #expect(locations.uniformLocation(below: "/home/ann/OneDrive/Shared") == sharePoint)
        #expect(locations.uniformLocation(below: "/home/ann/OneDrive/Docs/") == oneDrive)
        #expect(locations.uniformLocation(below: "/home/ann/OneDriveX") == .localDrive)
        #expect(locations.uniformLocation(below: "/home") == nil)
        #expect(locations.uniformLocation(below: "/tmp/m") == .localDrive)
        #expect(StorageLocations().uniformLocation(below: "/") == .localDrive)
    }

    @Test("location names map to both sides of the reference's vocabulary")
    func locationNames() {
        #expect(StorageLocation(named: "LocalStorage") == .localDrive)
        #expect(StorageLocation(named: "LocalDrive") == .localDrive)
        #expect(StorageLocation(named: "Other") == .other)
        #expect(StorageLocation(named: "Dropbox") == StorageLocation(save: .dropbox, open: .other))
        #expect(StorageLocation(named: "Camera") == StorageLocation(save: .cameraRoll, open: .camera))
        #expect(StorageLocation(named: "Photos") == StorageLocation(save: .cameraRoll, open: .photos))
        #expect(StorageLocation(named: "SharePoint") == StorageLocation(save: .sharePoint, open: .sharePoint))
        #expect(StorageLocation(named: "Moon") == nil)
    }
}
