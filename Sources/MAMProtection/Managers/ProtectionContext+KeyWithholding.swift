import Foundation

/// Withholding keys from memory and loading them again: the building block of the reference
/// SDK's file-protection levels (keys dropped while the device is locked, reloaded at unlock).
extension ProtectionContext {
    /// Drops the master key and the unwrapped keys of `accounts` (accountIds, UPNs are not
    /// resolved here) from memory; every other account that has keys keeps them (they are
    /// unwrapped first). Until `restoreKeys` every file, buffer or new file of a withheld
    /// account fails with `MAMError.keyUnavailable` (EACCES through a mount, exit 77).
    /// - Throws: `.authenticationFailed` when a kept account's stored key does not
    ///   authenticate (nothing is dropped then).
    public func withholdKeys(of accounts: Set<String>) throws {
        try keys.withhold(accounts: accounts)
    }

    /// Loads the master key again (`MasterKey.load`: the key file, or the passphrase in
    /// `passphraseFile` for a passphrase-protected state) and ends withholding. Nothing
    /// happens to the withheld set when it fails.
    /// - Throws: `.keyUnavailable` for a missing or wrong passphrase or key file.
    public func restoreKeys(passphraseFile: String?) throws {
        let key = try MasterKey.load(from: stateDirectory, state: state, passphraseFile: passphraseFile)
        keys.restore(masterKey: key)
        keys.invalidate()
    }

    /// The canonical accountIds whose keys are withheld (empty normally).
    public var withheldAccounts: Set<String> { keys.withheldAccounts }

    /// Whether the master key is in memory (false while keys are withheld).
    public var holdsMasterKey: Bool { keys.holdsMasterKey }
}
