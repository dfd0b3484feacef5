import Foundation

extension Policy {
    /// `appConfig`: an object of non-empty string keys to string values.
    /// - Throws: `MAMError.invalidArguments` naming `source` and the key for anything else
    ///   (a non-object, a number, boolean, null, array or object as a value, an empty key).
    static func appConfig(_ value: Any, source: String) throws -> [String: String] {
        let key = Key.appConfig
        guard let object = value as? [String: Any] else {
            throw invalid(source, "key '\(key)': expected an object of setting name -> string, got \(describe(value))")
        }
        var settings: [String: String] = [:]
        for (name, setting) in object {
            guard !name.isEmpty else { throw invalid(source, "key '\(key)': a setting name must not be empty") }
            guard let text = setting as? String, !isJSONBool(setting) else {
                throw invalid(source, "key '\(key)': '\(InputQuote.short(name))' must be a string, got \(describe(setting))")
            }
            settings[name] = text
        }
        return settings
    }

    /// `appConfig` as a JSON object, names sorted, names and values escaped.
    func appConfigJSON() -> String {
        let members = appConfig.keys.sorted().map { name in
            "    \(Policy.jsonString(name)): \(Policy.jsonString(appConfig[name] ?? ""))"
        }
        return "{\n" + members.joined(separator: ",\n") + "\n  }"
    }

    /// The value of the app-configuration setting `name` (exact, case-sensitive), or nil.
    /// Mirrors `IntuneMAMAppConfig stringValueForKey:`.
    public func appConfigValue(_ name: String) -> String? { appConfig[name] }
}
