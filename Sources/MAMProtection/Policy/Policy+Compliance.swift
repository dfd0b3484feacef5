import Foundation

extension Policy {
    /// `complianceMaxAge` when the key is absent: one day, in seconds.
    public static let defaultComplianceMaxAge = 86_400
    /// Largest `complianceMaxAge`: 365 days, in seconds.
    public static let maximumComplianceMaxAge = 365 * 86_400

    /// `compliance`: a non-empty array of check objects (`ComplianceCheck.parse`).
    /// - Throws: `MAMError.invalidArguments` naming `source` and the key.
    static func complianceChecks(_ value: Any, source: String) throws -> [ComplianceCheck] {
        let key = Key.compliance
        guard let array = value as? [Any] else {
            throw invalid(source, "key '\(key)': expected an array of {\"check\": ...} objects, got \(describe(value))")
        }
        guard !array.isEmpty else {
            throw invalid(source, "key '\(key)': the list is empty (leave the key out for no compliance checks)")
        }
        return try array.enumerated().map { index, element in
            try ComplianceCheck.parse(element, index: index) { invalid(source, "key '\(key)': \($0)") }
        }
    }

    /// `complianceMaxAge`: an integer number of seconds (1 or more), or a string of digits
    /// followed by one unit, `s`, `m`, `h` or `d` ("90s", "15m", "12h", "7d"); at most 365 days.
    /// - Returns: seconds.
    /// - Throws: `MAMError.invalidArguments` naming `source` and the key.
    static func complianceMaxAge(_ value: Any, source: String) throws -> Int {
        let key = Key.complianceMaxAge
        let seconds: Int?
        if value is String, let text = value as? String {
            seconds = durationSeconds(text)
            if seconds == nil {
                throw invalid(source, "key '\(key)': '\(InputQuote.short(text))' is not a duration (digits and one unit of s, m, h, d, e.g. \"12h\")")
            }
        } else if let number = ComplianceCheck.integer(value) {
            seconds = number
        } else {
            throw invalid(source, "key '\(key)': expected a number of seconds or a duration string such as \"12h\", got \(describe(value))")
        }
        guard let seconds, seconds >= 1, seconds <= maximumComplianceMaxAge else {
            throw invalid(source, "key '\(key)': must be from 1 second to 365 days")
        }
        return seconds
    }

    /// "15m" -> 900; nil for anything but digits and one of s, m, h, d.
    static func durationSeconds(_ text: String) -> Int? {
        guard let unit = text.last, let multiplier = ["s": 1, "m": 60, "h": 3600, "d": 86_400][unit] else { return nil }
        let digits = text.dropLast()
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let count = Int(digits) else { return nil }
        return count * multiplier
    }

    /// The compliance keys as JSON members (`"key": value`), sorted; none without `compliance`.
    func complianceJSONMembers() -> (checks: [String], wipe: String?) {
        guard let compliance else { return ([], nil) }
        let checks = "\"\(Key.compliance)\": [\n" + compliance.map { "    " + $0.jsonText() }.joined(separator: ",\n") + "\n  ]"
        return ([checks, "\"\(Key.complianceMaxAge)\": \(complianceMaxAge)"],
                wipeOnNonCompliance ? "\"\(Key.wipeOnNonCompliance)\": true" : nil)
    }
}
