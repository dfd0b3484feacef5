import COpenSSL
import Foundation
import MAMSystem

/// Creates and loads the master key (KEK) of a state directory.
///
/// Two sources, chosen at `mamfs init` and recorded in the state's `meta` table:
/// - `keyfile`: 32 random bytes in `master.key` (mode 0600);
/// - `scrypt`: derived from a passphrase file with scrypt (salt and cost in `meta`).
/// Either way a check value (a GCM seal of a constant under the KEK) detects a wrong
/// passphrase or a swapped key file before any account key is touched.
public enum MasterKey {
    static let kdfMetaKey = "kdf"
    static let scryptMetaKey = "kdf.scrypt"
    static let checkMetaKey = "kek.check"
    static let checkPlaintext = Array("mamfs master key check v1".utf8)
    static let checkAAD = Array("mamfs kek check".utf8)

    /// Makes a new KEK for a fresh state and records how to find it again.
    /// - Parameter passphraseFile: path of a file whose contents (without a trailing newline)
    ///   are the passphrase; nil for a random key file.
    /// - Throws: `.fileNotFound` / `.invalidArguments` for a missing or empty passphrase file,
    ///   `.cannotCreateOutput` when the key file cannot be written.
    static func create(in directory: StateDirectory, state: StateStore, passphraseFile: String?) throws -> SymmetricKey {
        let key: SymmetricKey
        if let passphraseFile {
            let parameters = try ScryptParameters.fresh()
            let passphrase = try readPassphrase(passphraseFile)
            key = try parameters.deriveKey(passphraseBytes: UnsafeRawBufferPointer(passphrase.bytes))
            try state.setMetaValue(Data("scrypt".utf8), forKey: kdfMetaKey)
            try state.setMetaValue(try JSONEncoder().encode(parameters), forKey: scryptMetaKey)
        } else {
            key = try SymmetricKey.random()
            try writeKeyFile(key, to: directory.masterKeyURL.path)
            try state.setMetaValue(Data("keyfile".utf8), forKey: kdfMetaKey)
        }
        let check = try AESGCM(key: key).seal(checkPlaintext, aad: checkAAD)
        try state.setMetaValue(Data(check), forKey: checkMetaKey)
        return key
    }

    /// Loads the KEK of an existing state.
    /// - Throws: `.keyUnavailable` for a missing/unreadable key file, a missing passphrase for a
    ///   passphrase-protected state, or a wrong passphrase/key file.
    static func load(from directory: StateDirectory, state: StateStore, passphraseFile: String?) throws -> SymmetricKey {
        try load(from: directory, state: state, passphrase: passphraseFile.map { file in { try readPassphrase(file) } })
    }

    /// `load(from:state:passphraseFile:)` with the passphrase from `passphrase` (called only
    /// for a passphrase-protected state; nil: none was given).
    static func load(from directory: StateDirectory, state: StateStore, passphrase: (() throws -> SecretBuffer)?) throws -> SymmetricKey {
        let kdf = try state.metaValue(kdfMetaKey).flatMap { String(data: $0, encoding: .utf8) } ?? "keyfile"
        let key: SymmetricKey
        switch kdf {
        case "scrypt":
            guard let passphrase else {
                throw MAMError.keyUnavailable("the state in \(directory) is protected by a passphrase: set MAMFS_PASSPHRASE_FILE to the passphrase file")
            }
            guard let data = try state.metaValue(scryptMetaKey),
                  let parameters = try? JSONDecoder().decode(ScryptParameters.self, from: data) else {
                throw MAMError.damagedDatabase("the state's scrypt parameters are missing or damaged (restore the state from a backup)")
            }
            let secret = try passphrase()
            key = try parameters.deriveKey(passphraseBytes: UnsafeRawBufferPointer(secret.bytes))
        case "keyfile":
            key = try readKeyFile(directory.masterKeyURL.path)
        default:
            throw MAMError.newerVersion("unknown key derivation '\(InputQuote.short(kdf))' in the state (use the mamfs that made it)")
        }
        guard let check = try state.metaValue(checkMetaKey) else {
            throw MAMError.damagedDatabase("the state has no master key check value (restore the state from a backup)")
        }
        guard let opened = try AESGCM(key: key).open(Array(check), aad: checkAAD), opened == checkPlaintext else {
            throw MAMError.keyUnavailable(kdf == "scrypt" ? "wrong passphrase" : "the master key file \(directory.masterKeyURL.path) does not belong to this state")
        }
        return key
    }

    /// Passphrase files larger than this are refused (a passphrase is a line of text).
    static let maximumPassphraseLength = 64 * 1024

    /// Reads a passphrase file into wiped-on-release memory; one trailing newline (LF or CRLF)
    /// is not part of the passphrase.
    /// - Throws: `.fileNotFound` when it cannot be read, `.invalidArguments` when it is empty
    ///   or longer than `maximumPassphraseLength`.
    static func readPassphrase(_ path: String) throws -> SecretBuffer {
        let opened: FileDescriptor
        do {
            opened = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        } catch {
            errno = error.rawValue
            throw MAMError.fileNotFound("passphrase file \(path)")
        }
        let fd = opened.rawValue
        let raw = SecretBuffer(count: maximumPassphraseLength + 1)
        var count = try FileIO.preadFully(fd, raw.bytes, at: 0)
        guard count <= maximumPassphraseLength else {
            throw MAMError.invalidArguments("passphrase file \(path) is longer than \(maximumPassphraseLength) bytes")
        }
        if count > 0 && raw.bytes[count - 1] == 0x0A { count -= 1 }
        if count > 0 && raw.bytes[count - 1] == 0x0D { count -= 1 }
        guard count > 0 else { throw MAMError.invalidArguments("passphrase file \(path) is empty") }
        let passphrase = SecretBuffer(count: count)
        passphrase.bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.bytes[0..<count]))
        return passphrase
    }

    private static func writeKeyFile(_ key: SymmetricKey, to path: String) throws {
        let opened: FileDescriptor
        do {
            opened = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600)
        } catch {
            errno = error.rawValue
            throw MAMError.cannotCreateOutput("\(path): \(String(cString: strerror(errno)))")
        }
        let fd = opened.rawValue
        try key.withUnsafeBytes { try FileIO.pwriteFully(fd, $0, at: 0) }
        guard fsync(fd) == 0 else { throw MAMError.fromErrno("fsync \(path)") }
    }

    private static func readKeyFile(_ path: String) throws -> SymmetricKey {
        let opened: FileDescriptor
        do {
            opened = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        } catch {
            errno = error.rawValue
            throw MAMError.keyUnavailable("cannot open the master key file \(path): \(String(cString: strerror(errno)))")
        }
        let fd = opened.rawValue
        let buffer = SecretBuffer(count: SymmetricKey.byteCount + 1)
        let count = try FileIO.preadFully(fd, buffer.bytes, at: 0)
        guard count == SymmetricKey.byteCount else {
            throw MAMError.keyUnavailable("the master key file \(path) is not \(SymmetricKey.byteCount) bytes")
        }
        return try SymmetricKey(bytes: UnsafeRawBufferPointer(rebasing: buffer.bytes[0..<SymmetricKey.byteCount]))
    }
}
