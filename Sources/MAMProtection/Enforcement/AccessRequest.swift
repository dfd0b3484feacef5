import Foundation

/// One question to `AccessRules.decide`: may this executable do this action on an object with
/// this owner, in this location, for this app account?
public struct AccessRequest: Sendable {
    /// What is asked.
    public var action: AccessAction
    /// The calling program.
    public var executable: any ExecutableIdentity
    /// The object's owner tag: an accountId, "" (tagged unmanaged) or nil (untagged). For
    /// `.create`: the owner the directory would give the new file (the inherited owner).
    public var owner: String?
    /// Where the object is (for the open-from check of a managed app opening a personal file).
    public var location: StorageLocation
    /// The identity managed apps act for: the mount's `--account`, or the CLI's `--account`
    /// ("" when there is none).
    public var appAccount: String

    /// - Parameters: as the properties; `location` defaults to the local drive.
    public init(action: AccessAction, executable: any ExecutableIdentity, owner: String?,
                location: StorageLocation = .localDrive, appAccount: String) {
        self.action = action
        self.executable = executable
        self.owner = owner
        self.location = location
        self.appAccount = appAccount
    }
}
