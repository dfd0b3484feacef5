import Foundation

/// The protection policy the organisation assigns to one managed (enrolled) account.
///
/// Mirrors the per-account settings read through `IntuneMAMPolicy` (obtained from
/// `IntuneMAMPolicyManager policyForAccountId:`): whether files must be encrypted, whether a
/// file provider encrypts the copies it hands out, which incoming files the account may
/// receive, and where its data may be saved to and opened from.
///
/// Policies are stored as JSON (schema in docs/POLICY.md). Unmanaged accounts have no policy.
public struct Policy: Equatable, Sendable {
    /// Every file the account saves is encrypted (mirrors `IntuneMAMPolicy isFileEncryptionRequired`).
    public var fileEncryptionRequired: Bool
    /// A file provider encrypts the local copies it provides for this account
    /// (mirrors `IntuneMAMPolicy shouldFileProviderEncryptFiles`).
    public var fileProviderEncryptFiles: Bool
    /// Which incoming files the account may receive (drives `canReceiveSharedFile`).
    public var receiveData: ReceiveDataPolicy
    /// Where data owned by this account may be saved (drives `isSaveToAllowed`).
    public var saveToLocations: Set<SaveLocation>
    /// Where this account may open data from (drives `isOpenFromAllowed`).
    public var openFromLocations: Set<OpenLocation>
    /// Which executables are managed apps; nil (the key absent) makes every process a managed
    /// app. Mirrors Intune's "policy managed apps" / the allowed apps of Windows Information Protection.
    public var managedApps: [ManagedAppRule]?
    /// Which apps may open the account's files (Intune's "Send org data to other apps").
    public var sendData: SendDataPolicy
    /// Whether the account's data may be made personal: its owner changed to "" or another
    /// account, or decrypted by the CLI in place or to a copy ("allow user to decrypt").
    public var allowUserDecrypt: Bool
    /// Location name -> path prefixes; every other path is `LocalDrive`.
    public var locations: StorageLocations
    /// Whether a request the caller-aware rules would deny is blocked, only recorded, or neither.
    public var protectionLevel: ProtectionLevel
    /// App configuration delivered with the policy: setting name -> value, both strings
    /// (mirrors the app configuration of `IntuneMAMAppConfig`); empty when the key is absent.
    public var appConfig: [String: String]
    /// The compliance checks that must pass before the account's keys are unwrapped (App
    /// Protection Conditional Access); nil (the key absent) for none.
    public var compliance: [ComplianceCheck]?
    /// How long a Compliant result lets keys be unwrapped, in seconds (`complianceMaxAge`).
    public var complianceMaxAge: Int
    /// Whether a NotCompliant result starts the account's selective wipe.
    public var wipeOnNonCompliance: Bool
    /// When the account's keys may be in a mount daemon's memory, relative to the session
    /// lock (mirrors the SDK's maximum file protection level); `.none` when the key is absent.
    public var fileProtectionLevel: FileProtectionLevel

    /// Creates a policy; every parameter defaults to the value a missing JSON key takes.
    public init(
        fileEncryptionRequired: Bool = true,
        fileProviderEncryptFiles: Bool = true,
        receiveData: ReceiveDataPolicy = .all,
        saveToLocations: Set<SaveLocation> = Set(SaveLocation.allCases),
        openFromLocations: Set<OpenLocation> = Set(OpenLocation.allCases),
        managedApps: [ManagedAppRule]? = nil,
        sendData: SendDataPolicy = .allApps,
        allowUserDecrypt: Bool = true,
        locations: StorageLocations = StorageLocations(),
        protectionLevel: ProtectionLevel = .off,
        appConfig: [String: String] = [:],
        compliance: [ComplianceCheck]? = nil,
        complianceMaxAge: Int = Policy.defaultComplianceMaxAge,
        wipeOnNonCompliance: Bool = false,
        fileProtectionLevel: FileProtectionLevel = .none
    ) {
        self.fileEncryptionRequired = fileEncryptionRequired
        self.fileProviderEncryptFiles = fileProviderEncryptFiles
        self.receiveData = receiveData
        self.saveToLocations = saveToLocations
        self.openFromLocations = openFromLocations
        self.managedApps = managedApps
        self.sendData = sendData
        self.allowUserDecrypt = allowUserDecrypt
        self.locations = locations
        self.protectionLevel = protectionLevel
        self.appConfig = appConfig
        self.compliance = compliance
        self.complianceMaxAge = complianceMaxAge
        self.wipeOnNonCompliance = wipeOnNonCompliance
        self.fileProtectionLevel = fileProtectionLevel
    }

    /// The demo's encrypting policy (same content as Tools/demo/policy-encrypt.json): files
    /// encrypted, provider copies encrypted, only managed data received, saving limited to the
    /// organisation's stores and the account's own documents, opening from those plus local storage.
    public static let demoEncrypting = Policy(
        fileEncryptionRequired: true,
        fileProviderEncryptFiles: true,
        receiveData: .managedOnly,
        saveToLocations: [.oneDriveForBusiness, .sharePoint, .accountDocument],
        openFromLocations: [.oneDriveForBusiness, .sharePoint, .accountDocument, .localStorage, .camera]
    )

    /// JSON key names of the schema.
    enum Key {
        static let fileEncryptionRequired = "fileEncryptionRequired"
        static let fileProviderEncryptFiles = "fileProviderEncryptFiles"
        static let receiveData = "receiveData"
        static let saveToLocations = "saveToLocations"
        static let openFromLocations = "openFromLocations"
        static let managedApps = "managedApps"
        static let sendData = "sendData"
        static let allowUserDecrypt = "allowUserDecrypt"
        static let locations = "locations"
        static let protectionLevel = "protectionLevel"
        static let appConfig = "appConfig"
        static let compliance = "compliance"
        static let complianceMaxAge = "complianceMaxAge"
        static let wipeOnNonCompliance = "wipeOnNonCompliance"
        static let fileProtectionLevel = "fileProtectionLevel"
        static let all: Set<String> = [
            fileEncryptionRequired, fileProviderEncryptFiles, receiveData, saveToLocations, openFromLocations,
            managedApps, sendData, allowUserDecrypt, locations, protectionLevel, appConfig,
            compliance, complianceMaxAge, wipeOnNonCompliance, fileProtectionLevel,
        ]
    }

    /// Parses a policy from JSON, strictly.
    ///
    /// - Parameters:
    ///   - json: UTF-8 JSON; the top level must be an object whose keys are those of
    ///     docs/POLICY.md. Missing keys take their defaults (see `init`). Location names and
    ///     `receiveData` values are matched case-insensitively.
    ///   - source: where the JSON came from (usually a file name); every error message names it.
    /// - Throws: `MAMError.invalidArguments` with a one-line message naming `source` and the
    ///   offending key, for: invalid JSON, a non-object top level, an unknown key, a value of the
    ///   wrong type (a number where a boolean is expected is rejected), an unknown
    ///   `receiveData` value, an unknown or repeated location name, a key that appears twice in
    ///   one object. Rejected input is quoted by at most a short prefix (`InputQuote`).
    public static func parse(_ json: Data, source: String) throws -> Policy {
        let top: Any
        do {
            top = try JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])
        } catch {
            throw invalid(source, "invalid JSON (\(InputQuote.short(String(describing: error), limit: 200)))")
        }
        if let key = JSONObjectKeys.firstDuplicate(in: json) {
            throw invalid(source, "duplicate key '\(InputQuote.short(key))' (each key may appear only once in an object)")
        }
        guard let object = top as? [String: Any] else {
            throw invalid(source, "top level must be a JSON object, got \(describe(top))")
        }
        let unknown = object.keys.filter { !Key.all.contains($0) }.sorted()
        if !unknown.isEmpty {
            let names = unknown.prefix(5).map { "'\(InputQuote.short($0))'" }.joined(separator: ", ") + (unknown.count > 5 ? ", …" : "")
            let allowed = Key.all.sorted().joined(separator: ", ")
            throw invalid(source, "unknown key \(names) (allowed keys: \(allowed))")
        }

        var policy = Policy()
        if let value = object[Key.fileEncryptionRequired] {
            policy.fileEncryptionRequired = try bool(value, key: Key.fileEncryptionRequired, source: source)
        }
        if let value = object[Key.fileProviderEncryptFiles] {
            policy.fileProviderEncryptFiles = try bool(value, key: Key.fileProviderEncryptFiles, source: source)
        }
        if let value = object[Key.receiveData] {
            policy.receiveData = try name(value, key: Key.receiveData, source: source)
        }
        if let value = object[Key.sendData] {
            policy.sendData = try name(value, key: Key.sendData, source: source)
        }
        if let value = object[Key.protectionLevel] {
            policy.protectionLevel = try name(value, key: Key.protectionLevel, source: source)
        }
        if let value = object[Key.fileProtectionLevel] {
            policy.fileProtectionLevel = try name(value, key: Key.fileProtectionLevel, source: source)
        }
        if let value = object[Key.allowUserDecrypt] {
            policy.allowUserDecrypt = try bool(value, key: Key.allowUserDecrypt, source: source)
        }
        if let value = object[Key.managedApps] {
            policy.managedApps = try managedApps(value, source: source)
        }
        if let value = object[Key.locations] {
            policy.locations = try storageLocations(value, source: source)
        }
        if let value = object[Key.appConfig] {
            policy.appConfig = try appConfig(value, source: source)
        }
        if let value = object[Key.compliance] {
            policy.compliance = try complianceChecks(value, source: source)
        }
        if let value = object[Key.complianceMaxAge] {
            policy.complianceMaxAge = try complianceMaxAge(value, source: source)
        }
        if let value = object[Key.wipeOnNonCompliance] {
            policy.wipeOnNonCompliance = try bool(value, key: Key.wipeOnNonCompliance, source: source)
        }
        if policy.compliance == nil, let orphan = [Key.complianceMaxAge, Key.wipeOnNonCompliance].first(where: { object[$0] != nil }) {
            throw invalid(source, "key '\(orphan)' needs the key '\(Key.compliance)'")
        }
        if let value = object[Key.saveToLocations] {
            policy.saveToLocations = try locations(value, key: Key.saveToLocations, source: source,
                                                   parse: SaveLocation.init(parsing:))
        }
        if let value = object[Key.openFromLocations] {
            policy.openFromLocations = try locations(value, key: Key.openFromLocations, source: source,
                                                     parse: OpenLocation.init(parsing:))
        }
        return policy
    }

    /// The policy as JSON: pretty-printed, keys sorted, location arrays sorted by name; every
    /// key of the encryption and location rules present, the enforcement keys (`managedApps`,
    /// `sendData`, `allowUserDecrypt`, `locations`, `protectionLevel`), `fileProtectionLevel` and `appConfig` only when they are not
    /// their defaults. `Policy.parse(p.jsonData(), source:)` gives back `p`.
    public func jsonData() -> Data {
        func list<L: RawRepresentable>(_ set: Set<L>) -> String where L.RawValue == String {
            let names = set.map(\.rawValue).sorted()
            if names.isEmpty { return "[]" }
            return "[\n" + names.map { "    \"\($0)\"" }.joined(separator: ",\n") + "\n  ]"
        }
        // Keys in sorted order; paths are escaped (`jsonString`), every other value is a bool or a
        // known enum name.
        var members: [String] = []
        // The enforcement keys are written only when they differ from their defaults, so a
        // policy without them reads as it always did.
        if !allowUserDecrypt { members.append("\"\(Key.allowUserDecrypt)\": false") }
        if !appConfig.isEmpty { members.append("\"\(Key.appConfig)\": \(appConfigJSON())") }
        let complianceMembers = complianceJSONMembers()
        members += complianceMembers.checks
        members += [
            "\"\(Key.fileEncryptionRequired)\": \(fileEncryptionRequired)",
        ]
        if fileProtectionLevel != .none {
            members.append("\"\(Key.fileProtectionLevel)\": \"\(fileProtectionLevel.rawValue)\"")
        }
        members.append("\"\(Key.fileProviderEncryptFiles)\": \(fileProviderEncryptFiles)")
        if !locations.isEmpty { members.append("\"\(Key.locations)\": \(locationsJSON())") }
        if let managedApps {
            let rules = managedApps.map { rule in
                "    {\"path\": \(Policy.jsonString(rule.path))" + (rule.sha256.map { ", \"sha256\": \"\($0)\"" } ?? "") + "}"
            }
            members.append("\"\(Key.managedApps)\": " + (rules.isEmpty ? "[]" : "[\n" + rules.joined(separator: ",\n") + "\n  ]"))
        }
        members.append("\"\(Key.openFromLocations)\": \(list(openFromLocations))")
        if protectionLevel != .off { members.append("\"\(Key.protectionLevel)\": \"\(protectionLevel.rawValue)\"") }
        members += [
            "\"\(Key.receiveData)\": \"\(receiveData.rawValue)\"",
            "\"\(Key.saveToLocations)\": \(list(saveToLocations))",
        ]
        if sendData != .allApps { members.append("\"\(Key.sendData)\": \"\(sendData.rawValue)\"") }
        if let wipe = complianceMembers.wipe { members.append(wipe) }
        let text = "{\n" + members.map { "  " + $0 }.joined(separator: ",\n") + "\n}\n"
        return Data(text.utf8)
    }

    /// `locations` as a JSON object, names and prefixes sorted.
    private func locationsJSON() -> String {
        let table = locations.table
        if table.isEmpty { return "{}" }
        let members = table.keys.sorted().map { name in
            "    \"\(name)\": [" + table[name]!.map(Policy.jsonString).joined(separator: ", ") + "]"
        }
        return "{\n" + members.joined(separator: ",\n") + "\n  }"
    }

    /// `text` as a JSON string literal (quotes, backslashes and control characters escaped).
    static func jsonString(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed, .withoutEscapingSlashes])) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: - Parsing helpers

    /// A policy-vocabulary name (`receiveData`, `sendData`, `protectionLevel`,
    /// `fileProtectionLevel`), case-insensitive.
    private static func name<N: PolicyName>(_ value: Any, key: String, source: String) throws -> N {
        guard let text = value as? String else {
            throw invalid(source, "key '\(key)': expected a string, got \(describe(value))")
        }
        guard let parsed = N(parsing: text) else {
            let allowed = N.allCases.map(\.rawValue).joined(separator: ", ")
            throw invalid(source, "key '\(key)': '\(InputQuote.short(text))' is not one of \(allowed)")
        }
        return parsed
    }

    /// `managedApps`: an array of objects with a string `path` and an optional string `sha256`.
    private static func managedApps(_ value: Any, source: String) throws -> [ManagedAppRule] {
        let key = Key.managedApps
        guard let array = value as? [Any] else {
            throw invalid(source, "key '\(key)': expected an array of {\"path\": ..., \"sha256\": ...} objects, got \(describe(value))")
        }
        var rules: [ManagedAppRule] = []
        for (index, element) in array.enumerated() {
            guard let object = element as? [String: Any] else {
                throw invalid(source, "key '\(key)': element \(index) must be an object, got \(describe(element))")
            }
            if let extra = object.keys.first(where: { $0 != "path" && $0 != "sha256" }) {
                throw invalid(source, "key '\(key)': element \(index): unknown key '\(InputQuote.short(extra))' (allowed keys: path, sha256)")
            }
            guard let path = object["path"] as? String else {
                throw invalid(source, "key '\(key)': element \(index): 'path' must be a string, got \(object["path"].map(describe) ?? "nothing")")
            }
            var digest: String?
            if let value = object["sha256"] {
                guard let text = value as? String else {
                    throw invalid(source, "key '\(key)': element \(index): 'sha256' must be a string, got \(describe(value))")
                }
                digest = text
            }
            do {
                let rule = try ManagedAppRule(path: path, sha256: digest)
                guard !rules.contains(rule) else {
                    throw invalid(source, "key '\(key)': element \(index) repeats '\(InputQuote.short(path))'")
                }
                rules.append(rule)
            } catch let MAMError.invalidArguments(message) {
                throw invalid(source, "key '\(key)': element \(index): \(message)")
            }
        }
        return rules
    }

    /// `locations`: an object of location name -> array of absolute path prefixes.
    private static func storageLocations(_ value: Any, source: String) throws -> StorageLocations {
        let key = Key.locations
        guard let object = value as? [String: Any] else {
            throw invalid(source, "key '\(key)': expected an object of location name -> path prefixes, got \(describe(value))")
        }
        var table: [String: [String]] = [:]
        for (name, prefixes) in object {
            guard let array = prefixes as? [Any], array.allSatisfy({ $0 is String }) else {
                throw invalid(source, "key '\(key)': '\(InputQuote.short(name))' must be an array of path prefixes, got \(describe(prefixes))")
            }
            table[name] = array.compactMap { $0 as? String }
        }
        do {
            return try StorageLocations(table)
        } catch let MAMError.invalidArguments(message) {
            throw invalid(source, message)
        }
    }

    static func invalid(_ source: String, _ message: String) -> MAMError {
        .invalidArguments("policy \(InputQuote.short(source, limit: 4096)): \(message)")
    }

    /// True only for a JSON `true`/`false`. Foundation hands both booleans and numbers back as
    /// NSNumber, and on Linux `1 as? Bool` succeeds, so the boolean subclass is checked instead.
    static func isJSONBool(_ value: Any) -> Bool {
        guard let number = value as? NSNumber else { return false }
        return type(of: number) == type(of: NSNumber(value: true))
    }

    static func bool(_ value: Any, key: String, source: String) throws -> Bool {
        guard isJSONBool(value), let flag = value as? Bool else {
            throw invalid(source, "key '\(key)': expected true or false, got \(describe(value))")
        }
        return flag
    }

    private static func locations<L: Hashable>(
        _ value: Any, key: String, source: String, parse: (String) -> L?
    ) throws -> Set<L> where L: CaseIterable & RawRepresentable, L.RawValue == String {
        guard let array = value as? [Any] else {
            throw invalid(source, "key '\(key)': expected an array of location names, got \(describe(value))")
        }
        var result = Set<L>()
        for (index, element) in array.enumerated() {
            guard let name = element as? String else {
                throw invalid(source, "key '\(key)': element \(index) must be a location name, got \(describe(element))")
            }
            guard let location = parse(name) else {
                let allowed = L.allCases.map(\.rawValue).joined(separator: ", ")
                throw invalid(source, "key '\(key)': '\(InputQuote.short(name))' is not a location (allowed: \(allowed))")
            }
            guard result.insert(location).inserted else {
                throw invalid(source, "key '\(key)': '\(location.rawValue)' is listed more than once")
            }
        }
        return result
    }

    /// A short name of a JSON value's type for error messages.
    static func describe(_ value: Any) -> String {
        if value is NSNull { return "null" }
        if isJSONBool(value) { return "a boolean" }
        if value is NSNumber { return "a number" }
        if value is String { return "a string" }
        if value is [Any] { return "an array" }
        if value is [String: Any] { return "an object" }
        return "an unsupported value"
    }
}
