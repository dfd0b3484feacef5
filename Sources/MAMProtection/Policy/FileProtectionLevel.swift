import Foundation

/// When a managed account's keys may be in a mount daemon's memory, tied to the desktop
/// session lock (policy key `fileProtectionLevel`).
///
/// Mirrors the reference SDK's maximum file protection level (the iOS data-protection
/// classes `NSFileProtectionComplete`, `...CompleteUnlessOpen`,
/// `...CompleteUntilFirstUserAuthentication`, `...None`); on Linux the device lock is the
/// session lock (logind's `Lock`/`Unlock`, the screensaver's `ActiveChanged`, `mamfs lock`).
/// The raw values are the names used in policy JSON.
public enum FileProtectionLevel: String, CaseIterable, PolicyName, Sendable, Codable {
    /// Within seconds of a lock the account's keys (and the master key) leave the daemon's
    /// memory; every open, read and write of the account's files fails with EACCES until the
    /// session is unlocked again.
    case complete
    /// As `complete` for new opens, but a file opened before the lock stays readable and
    /// writable through that handle (its file key is kept with the handle).
    case completeUnlessOpen
    /// Nothing of the account is readable from the mount's start until the first unlock;
    /// later locks change nothing.
    case untilFirstUserAuth
    /// Keys stay in memory whatever the session does (the default).
    case none

    /// Whether a lock drops the account's keys.
    public var dropsKeysOnLock: Bool { self == .complete || self == .completeUnlessOpen }
}
