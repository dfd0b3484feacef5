import Foundation

/// Which processes may open files a managed account owns (policy key `sendData`).
///
/// Mirrors Intune's app protection setting "Send org data to other apps" (`All apps` /
/// `Policy managed apps`). The raw values are the names used in policy JSON.
public enum SendDataPolicy: String, CaseIterable, PolicyName, Sendable, Codable {
    /// Every process may open the account's files (today's behaviour, the default).
    case allApps
    /// Only managed apps (`managedApps`) may open them.
    case managedApps
}
