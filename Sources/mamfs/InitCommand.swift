import Foundation
import MAMProtection

/// `mamfs init [--passphrase-file F]`: creates the state directory, its database and the
/// master key (a random 0600 key file, or derived from a passphrase with scrypt).
enum InitCommand {
    static let verb = Verb(
        "init",
        usage: ["mamfs init [--passphrase-file F] [--state DIR]"],
        summary: "Create the state directory with its database and master key. Without --passphrase-file the master key is 256 random bits in DIR/master.key (mode 0600); with it the key is derived from the passphrase in F (scrypt), and later commands read F from $MAMFS_PASSPHRASE_FILE.",
        options: ["--passphrase-file F      derive the master key from the passphrase in file F"],
        spec: ArgumentSpec(options: ["--passphrase-file"]),
        run: run)

    static func run(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let directory = invocation.stateDirectory
        let passphraseFile = arguments.value("--passphrase-file") ?? invocation.passphraseFile
        if let passphraseFile {
            guard !passphraseFile.isEmpty else { throw UsageError("--passphrase-file needs a file name") }
            try requireReadableFile(passphraseFile)
        }
        var before = stat()
        let existed = stat(directory.url.path, &before) == 0
        try attempt(directory.url.path) {
            try ProtectionContext.initialize(stateDirectory: directory, passphraseFile: passphraseFile)
        }
        if existed, before.st_mode & 0o077 != 0 {
            Output.line("Set the mode of \(directory.url.path) to 0700 (it was \(String(before.st_mode & 0o7777, radix: 8)))")
        }
        if passphraseFile != nil {
            Output.line("Initialized mamfs state in \(directory.url.path) (master key derived from the passphrase)")
        } else {
            Output.line("Initialized mamfs state in \(directory.url.path) (master key in \(directory.masterKeyURL.path))")
        }
        return ExitCode.ok
    }
}

/// Fails with `ExitCode.noInput` when `path` is not an existing readable regular file.
func requireReadableFile(_ path: String) throws {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        throw CommandFailure(subject: path, message: "no such file", exitCode: ExitCode.noInput)
    }
    if isDirectory.boolValue {
        throw CommandFailure(subject: path, message: "is a directory", exitCode: ExitCode.noInput)
    }
    guard FileManager.default.isReadableFile(atPath: path) else {
        throw CommandFailure(subject: path, message: "permission denied", exitCode: ExitCode.noInput)
    }
}

/// Reads a whole input file; failures are `CommandFailure`s about `path` (`.noInput` when missing).
func readInputFile(_ path: String) throws -> Data {
    try requireReadableFile(path)
    return try attempt(path) { try Data(contentsOf: URL(fileURLWithPath: path)) }
}
