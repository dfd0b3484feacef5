import Foundation
import Testing
@testable import MAMProtection

/// Parses `text` as policy JSON from a source named "test.json".
private func parse(_ text: String) throws -> Policy {
    try Policy.parse(Data(text.utf8), source: "test.json")
}

/// The message of the `.invalidArguments` error that parsing `text` throws, or nil if it
/// throws something else or nothing.
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

@Suite("Policy parsing")
struct PolicyParseTests {
    @Test("empty object takes every documented default")
    func defaults() throws {
        let policy = try parse("{}")
        #expect(policy.fileEncryptionRequired == true)
        #expect(policy.fileProviderEncryptFiles == true)
        #expect(policy.receiveData == .all)
        #expect(policy.saveToLocations == Set(SaveLocation.allCases))
        #expect(policy.openFromLocations == Set(OpenLocation.allCases))
        #expect(policy.saveToLocations.count == 11)
        #expect(policy.openFromLocations.count == 10)
        #expect(policy == Policy())
    }

    @Test("a full policy is read field by field")
    func fullPolicy() throws {
        let policy = try parse("""
        {
          "fileEncryptionRequired": false,
          "fileProviderEncryptFiles": false,
          "receiveData": "none",
          "saveToLocations": ["SharePoint", "LocalDrive"],
          "openFromLocations": []
        }
        """)
        #expect(policy.fileEncryptionRequired == false)
        #expect(policy.fileProviderEncryptFiles == false)
        #expect(policy.receiveData == ReceiveDataPolicy.none)
        #expect(policy.saveToLocations == [.sharePoint, .localDrive])
        #expect(policy.openFromLocations.isEmpty)
    }

    @Test("a missing key keeps its default while others are set")
    func partialPolicy() throws {
        let policy = try parse(#"{"receiveData": "managedOnly"}"#)
        #expect(policy.receiveData == .managedOnly)
        #expect(policy.fileEncryptionRequired == true)
        #expect(policy.saveToLocations.count == SaveLocation.allCases.count)
    }

    @Test("JSON true and false are accepted for boolean keys")
    func booleansAccepted() throws {
        #expect(try parse(#"{"fileEncryptionRequired": true}"#).fileEncryptionRequired == true)
        #expect(try parse(#"{"fileEncryptionRequired": false}"#).fileEncryptionRequired == false)
        #expect(try parse(#"{"fileProviderEncryptFiles": false}"#).fileProviderEncryptFiles == false)
    }

    @Test("numbers are rejected for boolean keys", arguments: ["1", "0", "1.0", "2"])
    func numberForBoolRejected(number: String) throws {
        let message = try #require(rejection(#"{"fileEncryptionRequired": \#(number)}"#))
        #expect(message.contains("test.json"))
        #expect(message.contains("fileEncryptionRequired"))
        #expect(message.contains("a number"))
        let other = try #require(rejection(#"{"fileProviderEncryptFiles": \#(number)}"#))
        #expect(other.contains("fileProviderEncryptFiles"))
    }

    @Test("strings and null are rejected for boolean keys", arguments: [#""true""#, "null", "[]", "{}"])
    func otherTypesForBoolRejected(value: String) throws {
        let message = try #require(rejection(#"{"fileEncryptionRequired": \#(value)}"#))
        #expect(message.contains("test.json"))
        #expect(message.contains("fileEncryptionRequired"))
    }

    @Test("invalid JSON is rejected naming the source", arguments: ["", "{", "{\"a\":}", "not json", "{'a': 1}"])
    func invalidJSON(text: String) throws {
        let message = try #require(rejection(text))
        #expect(message.contains("test.json"))
        #expect(message.contains("invalid JSON"))
        #expect(!message.contains("\n"))
    }

    @Test("a top level that is not an object is rejected", arguments: ["[]", "true", "1", #""x""#, "null"])
    func nonObjectTopLevel(text: String) throws {
        let message = try #require(rejection(text))
        #expect(message.contains("test.json"))
        #expect(message.contains("top level must be a JSON object"))
    }

    @Test("an unknown key is rejected and named")
    func unknownKey() throws {
        let message = try #require(rejection(#"{"fileEncryptionRequired": true, "encryptEverything": true}"#))
        #expect(message.contains("test.json"))
        #expect(message.contains("unknown key 'encryptEverything'"))
        #expect(!message.contains("\n"))
    }

    @Test("keys are case-sensitive")
    func keyCase() throws {
        let message = try #require(rejection(#"{"FileEncryptionRequired": true}"#))
        #expect(message.contains("'FileEncryptionRequired'"))
    }

    @Test("receiveData must be a string naming a known value")
    func receiveDataRejected() throws {
        let wrongType = try #require(rejection(#"{"receiveData": 1}"#))
        #expect(wrongType.contains("receiveData"))
        #expect(wrongType.contains("expected a string"))
        let unknown = try #require(rejection(#"{"receiveData": "some"}"#))
        #expect(unknown.contains("receiveData"))
        #expect(unknown.contains("'some'"))
        #expect(unknown.contains("test.json"))
    }

    @Test("receiveData values are matched case-insensitively")
    func receiveDataCase() throws {
        #expect(try parse(#"{"receiveData": "MANAGEDONLY"}"#).receiveData == .managedOnly)
        #expect(try parse(#"{"receiveData": "All"}"#).receiveData == .all)
        #expect(try parse(#"{"receiveData": "None"}"#).receiveData == ReceiveDataPolicy.none)
    }

    @Test("location keys must be arrays of strings")
    func locationTypes() throws {
        let notArray = try #require(rejection(#"{"saveToLocations": "SharePoint"}"#))
        #expect(notArray.contains("saveToLocations"))
        #expect(notArray.contains("expected an array"))
        let notString = try #require(rejection(#"{"openFromLocations": ["Camera", 3]}"#))
        #expect(notString.contains("openFromLocations"))
        #expect(notString.contains("element 1"))
        let nullArray = try #require(rejection(#"{"openFromLocations": null}"#))
        #expect(nullArray.contains("null"))
    }

    @Test("an unknown location name is rejected and named")
    func unknownLocation() throws {
        let save = try #require(rejection(#"{"saveToLocations": ["SharePoint", "Floppy"]}"#))
        #expect(save.contains("test.json"))
        #expect(save.contains("saveToLocations"))
        #expect(save.contains("'Floppy'"))
        // An open-only name is not a save location, and the reverse.
        let cameraAsSave = try #require(rejection(#"{"saveToLocations": ["Camera"]}"#))
        #expect(cameraAsSave.contains("'Camera'"))
        let dropboxAsOpen = try #require(rejection(#"{"openFromLocations": ["Dropbox"]}"#))
        #expect(dropboxAsOpen.contains("openFromLocations"))
        #expect(dropboxAsOpen.contains("'Dropbox'"))
    }

    @Test("a location listed twice is rejected")
    func duplicateLocation() throws {
        let message = try #require(rejection(#"{"saveToLocations": ["Box", "box"]}"#))
        #expect(message.contains("more than once"))
    }

    @Test("every save location name is accepted", arguments: SaveLocation.allCases)
    func everySaveLocation(location: SaveLocation) throws {
        let exact = try parse(#"{"saveToLocations": ["\#(location.rawValue)"]}"#)
        #expect(exact.saveToLocations == [location])
        let lower = try parse(#"{"saveToLocations": ["\#(location.rawValue.lowercased())"]}"#)
        #expect(lower.saveToLocations == [location])
    }

    @Test("every open location name is accepted", arguments: OpenLocation.allCases)
    func everyOpenLocation(location: OpenLocation) throws {
        let exact = try parse(#"{"openFromLocations": ["\#(location.rawValue)"]}"#)
        #expect(exact.openFromLocations == [location])
        let upper = try parse(#"{"openFromLocations": ["\#(location.rawValue.uppercased())"]}"#)
        #expect(upper.openFromLocations == [location])
    }

    @Test("the source name appears in the message")
    func sourceNamed() throws {
        do {
            _ = try Policy.parse(Data("[]".utf8), source: "/etc/mamfs/contoso.json")
            Issue.record("expected a rejection")
        } catch let MAMError.invalidArguments(message) {
            #expect(message.contains("/etc/mamfs/contoso.json"))
        }
    }
}

@Suite("Policy locations and JSON output")
struct PolicyLocationTests {
    @Test("save location raw values are the reference names, in order")
    func saveRawValues() {
        #expect(SaveLocation.allCases.map(\.rawValue) == [
            "Other", "OneDriveForBusiness", "SharePoint", "Box", "Dropbox", "GoogleDrive",
            "LocalDrive", "CameraRoll", "AccountDocument", "IManage", "Egnyte",
        ])
    }

    @Test("open location raw values are the reference names, in order")
    func openRawValues() {
        #expect(OpenLocation.allCases.map(\.rawValue) == [
            "Other", "OneDriveForBusiness", "SharePoint", "Camera", "LocalStorage", "Photos",
            "AccountDocument", "Box", "IManage", "Egnyte",
        ])
    }

    @Test("location names parse case-insensitively")
    func caseInsensitiveNames() {
        #expect(SaveLocation(parsing: "onedriveforbusiness") == .oneDriveForBusiness)
        #expect(SaveLocation(parsing: "IMANAGE") == .iManage)
        #expect(SaveLocation(parsing: " googledrive ") == .googleDrive)
        #expect(SaveLocation(parsing: "Floppy") == nil)
        #expect(SaveLocation(parsing: "") == nil)
        #expect(OpenLocation(parsing: "localstorage") == .localStorage)
        #expect(OpenLocation(parsing: "CAMERA") == .camera)
        #expect(OpenLocation(parsing: "CameraRoll") == nil)
        #expect(ReceiveDataPolicy(parsing: "managedonly") == .managedOnly)
        #expect(ReceiveDataPolicy(parsing: "some") == nil)
    }

    @Test("Codable uses the reference names")
    func codable() throws {
        let data = try JSONEncoder().encode([SaveLocation.iManage])
        #expect(String(decoding: data, as: UTF8.self) == #"["IManage"]"#)
        let decoded = try JSONDecoder().decode([OpenLocation].self, from: Data(#"["LocalStorage"]"#.utf8))
        #expect(decoded == [.localStorage])
    }

    @Test("round trip through jsonData", arguments: [
        Policy(),
        Policy.demoEncrypting,
        Policy(fileEncryptionRequired: false, fileProviderEncryptFiles: false, receiveData: .none,
               saveToLocations: [], openFromLocations: []),
        Policy(fileEncryptionRequired: true, fileProviderEncryptFiles: false, receiveData: .managedOnly,
               saveToLocations: [.egnyte, .box], openFromLocations: [.photos]),
    ])
    func roundTrip(policy: Policy) throws {
        let again = try Policy.parse(policy.jsonData(), source: "roundtrip")
        #expect(again == policy)
        #expect(again.jsonData() == policy.jsonData())
    }

    @Test("jsonData is pretty, with sorted keys and sorted location arrays")
    func jsonDataShape() throws {
        let policy = Policy(fileEncryptionRequired: true, fileProviderEncryptFiles: false, receiveData: .managedOnly,
                            saveToLocations: [.sharePoint, .box, .oneDriveForBusiness], openFromLocations: [])
        let text = String(decoding: policy.jsonData(), as: UTF8.self)
        #expect(text == """
        {
          "fileEncryptionRequired": true,
          "fileProviderEncryptFiles": false,
          "openFromLocations": [],
          "receiveData": "managedOnly",
          "saveToLocations": [
            "Box",
            "OneDriveForBusiness",
            "SharePoint"
          ]
        }

        """)
        // It is also valid JSON for any other reader.
        let object = try #require(try JSONSerialization.jsonObject(with: policy.jsonData()) as? [String: Any])
        #expect(object.count == 5)
    }

    @Test("the demo preset encrypts and receives managed data only")
    func demoPreset() {
        let demo = Policy.demoEncrypting
        #expect(demo.fileEncryptionRequired)
        #expect(demo.fileProviderEncryptFiles)
        #expect(demo.receiveData == .managedOnly)
        #expect(!demo.saveToLocations.contains(.dropbox))
        #expect(demo.saveToLocations.contains(.oneDriveForBusiness))
    }

    @Test("the demo files parse and match the preset", arguments: ["policy-encrypt.json", "policy-plain.json"])
    func demoFiles(name: String) throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("Tools/demo").appendingPathComponent(name)
        let policy = try Policy.parse(Data(contentsOf: url), source: name)
        if name == "policy-encrypt.json" {
            #expect(policy == Policy.demoEncrypting)
        } else {
            #expect(policy.fileEncryptionRequired == false)
            #expect(policy.fileProviderEncryptFiles == false)
        }
    }
}
