import Foundation
import MAMProtection

/// What every verb gets besides its arguments: its name, the environment and the state directory.
struct Invocation {
    /// The verb name as printed in messages ("protect", "policy set").
    let verb: String
    let environment: [String: String]
    /// The `--state DIR` value, if given.
    let explicitState: String?
    /// `-v`/`--verbose` (before or after the verb): say more where the verb has more to say.
    var verbose = false

    /// The environment variable naming a passphrase file for a passphrase-derived master key.
    static let passphraseVariable = "MAMFS_PASSPHRASE_FILE"

    /// The state directory in effect (see `StateDirectory.resolve`).
    var stateDirectory: StateDirectory {
        StateDirectory.resolve(explicit: explicitState, environment: environment)
    }

    /// `$MAMFS_PASSPHRASE_FILE`, if set and not empty.
    var passphraseFile: String? {
        guard let value = environment[Self.passphraseVariable], !value.isEmpty else { return nil }
        // Absolute, so a mount daemon (which changes directory to /) still finds it.
        return value.hasPrefix("/") ? value : PathName.appending(value, to: FileManager.default.currentDirectoryPath)
    }

    /// Opens the protection context of the state directory.
    func openContext() throws -> ProtectionContext {
        let directory = stateDirectory
        return try attempt(directory.url.path) {
            try ProtectionContext.open(stateDirectory: directory, passphraseFile: passphraseFile)
        }
    }

    /// Reports one failure on stderr without stopping (for verbs that take several paths).
    func report(_ failure: CommandFailure) {
        Output.error(failure.line(verb: verb))
    }
}
