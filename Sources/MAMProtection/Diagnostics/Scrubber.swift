import Foundation

/// Replaces the state's scrub values (UPNs, paths, any text) with a placeholder in what
/// diagnostics print, so a report can be shared without them.
///
/// Matching is case-insensitive and finds a value anywhere inside a string; longer values are
/// replaced first, so a path is not left half-scrubbed by a shorter value inside it.
public struct Scrubber: Sendable {
    /// What every occurrence becomes.
    public static let placeholder = "[scrubbed]"

    /// The values, longest first.
    public let values: [String]

    public init(values: [String]) {
        self.values = values.filter { !$0.isEmpty }.sorted { $0.count > $1.count }
    }

    /// `text` with every occurrence of a value replaced by `placeholder`.
    public func scrub(_ text: String) -> String {
        var result = text
        for value in values {
            result = result.replacingOccurrences(of: value, with: Self.placeholder, options: .caseInsensitive)
        }
        return result
    }

    /// A JSON-shaped tree (dictionaries, arrays, strings, numbers, booleans, `NSNull`) with
    /// every string, dictionary keys included, scrubbed.
    public func scrubTree(_ value: Any) -> Any {
        switch value {
        case let text as String:
            return scrub(text)
        case let array as [Any]:
            return array.map(scrubTree)
        case let object as [String: Any]:
            var result: [String: Any] = [:]
            for (key, element) in object { result[scrub(key)] = scrubTree(element) }
            return result
        default:
            return value
        }
    }
}
