import Foundation

/// Which incoming files a managed account may receive (the rule behind `canReceiveSharedFile`).
///
/// The raw values are the names used in policy JSON (`"receiveData"`).
public enum ReceiveDataPolicy: String, CaseIterable, PolicyName, Sendable, Codable {
    /// Files from any source, managed or not.
    case all
    /// Only files owned by a managed (enrolled) account, or by the receiver itself.
    case managedOnly
    /// No files except the receiver's own.
    case none
}
