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

    /// `restoreKeys(passphraseFile:)` with the passphrase's bytes themselves (as `mamfs unlock`
    /// hands them to a mount daemon, which never writes them anywhere); they are copied into
    /// memory that is wiped after use. A key-file state ignores them.
    /// - Throws: `.keyUnavailable` for a wrong passphrase, or none (`passphrase` empty) for a
    ///   passphrase-protected state.
    public func restoreKeys(passphrase: UnsafeRawBufferPointer) throws {
        let source: (() throws -> SecretBuffer)? = passphrase.isEmpty ? nil : {
            let secret = SecretBuffer(count: passphrase.count)
            secret.bytes.copyMemory(from: passphrase)
            return secret
        }
        let key = try MasterKey.load(from: stateDirectory, state: state, passphrase: source)
        keys.restore(masterKey: key)
        keys.invalidate()
    }

    /// Drops every key this context holds, without touching the state database (which may be
    /// closed): for a forked mount daemon's copy of its parent's context, so the only key
    /// material in the daemon is its own context's, which the session lock can withhold.
    /// Every later key request of this context fails with `.keyUnavailable`.
    public func discardKeys() {
        keys.discardAll()
    }

    /// The canonical accountIds whose keys are withheld (empty normally).
    public var withheldAccounts: Set<String> { keys.withheldAccounts }

    /// Whether the master key is in memory (false while keys are withheld).
    public var holdsMasterKey: Bool { keys.holdsMasterKey }
}
