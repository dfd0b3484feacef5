import Foundation

/// Which incoming files a managed account may receive (the rule behind `canReceiveSharedFile`).
///
/// The raw values are the names used in policy JSON (`"receiveData"`).
public enum ReceiveDataPolicy: String, CaseIterable, Sendable, Codable {
    /// Files from any source, managed or not.
    case all
    /// Only files owned by a managed (enrolled) account, or by the receiver itself.
    case managedOnly
    /// No files except the receiver's own.
    case none

    /// Parses a value case-insensitively ("managedonly" -> `.managedOnly`).
    /// Surrounding whitespace is ignored. Returns nil for an unknown value.
    public init?(parsing name: String) {
        let wanted = name.trimmingWhitespace().lowercased()
        guard let match = ReceiveDataPolicy.allCases.first(where: { $0.rawValue.lowercased() == wanted }) else {
            return nil
        }
        self = match
    }
}
