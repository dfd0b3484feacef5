import Foundation

/// JSON output of the CLI: pretty-printed, keys sorted, a trailing newline.
enum JSON {
    /// Serializes arrays/dictionaries of strings, numbers, booleans and `NSNull`.
    static func text(_ value: Any) throws -> String {
        let data = try attempt(nil) {
            try JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        }
        return (String(data: data, encoding: .utf8) ?? "") + "\n"
    }

    /// One object on one line (JSON lines: keys sorted, no whitespace, a trailing newline).
    static func line(_ value: Any) throws -> String {
        let data = try attempt(nil) {
            try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        }
        return (String(data: data, encoding: .utf8) ?? "") + "\n"
    }
}
