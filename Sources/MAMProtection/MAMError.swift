import Foundation

/// Errors of the protection layer.
///
/// The first eight cases mirror the error codes of the reference SDK
/// (`IntuneMAMFileProtectionError` / `IntuneMAMDataProtectionError`); the others name the
/// conditions a filesystem and a CLI must tell apart. Messages never contain key material.
public enum MAMError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The account or application is not managed (reference: application not managed).
    case applicationNotManaged(String)
    /// An argument was malformed (reference: invalid arguments).
    case invalidArguments(String)
    /// Encryption failed (reference: failed to encrypt).
    case failedToEncrypt(String)
    /// Decryption failed for a reason other than authentication (reference: failed to decrypt).
    case failedToDecrypt(String)
    /// The path does not exist (reference: file not found).
    case fileNotFound(String)
    /// A file operation was asked of a directory (reference: operation on a directory).
    case operationOnDirectory(String)
    /// The identity given is unmanaged where a managed one is required (reference: unmanaged identity).
    case unmanagedIdentity(String)
    /// Anything else that should not happen (reference: internal error).
    case internalError(String)

    /// A header, block or wrapped key failed authentication, or a header is malformed:
    /// the data was corrupted or tampered with. Never returned as wrong plaintext.
    case authenticationFailed(String)
    /// The key needed to read the data is gone (account wiped, unknown account, wrong master key).
    case keyUnavailable(String)
    /// The account's policy forbids the operation.
    case policyDenied(String)
    /// The account is not registered in this state directory.
    case unknownAccount(String)
    /// Output could not be created (permissions, full disk, existing target).
    case cannotCreateOutput(String)
    /// A database of mamfs' own (`state.db`, a provider's `provider.db`) is damaged or is not a
    /// SQLite database at all (SQLITE_CORRUPT, SQLITE_NOTADB).
    case damagedDatabase(String)
    /// A database or key file of mamfs' own was written by a newer mamfs (a higher schema
    /// version, a key derivation this version does not know): not damaged, but not readable by
    /// this version either.
    case newerVersion(String)
    /// An operating-system call failed with `errno`.
    case system(String, errno: Int32)

    public var description: String {
        switch self {
        case .applicationNotManaged(let m): return "not managed: \(m)"
        case .invalidArguments(let m): return "invalid arguments: \(m)"
        case .failedToEncrypt(let m): return "failed to encrypt: \(m)"
        case .failedToDecrypt(let m): return "failed to decrypt: \(m)"
        case .fileNotFound(let m): return "file not found: \(m)"
        case .operationOnDirectory(let m): return "is a directory: \(m)"
        case .unmanagedIdentity(let m): return "unmanaged identity: \(m)"
        case .internalError(let m): return "internal error: \(m)"
        case .authenticationFailed(let m): return "authentication failed (corrupt or tampered data): \(m)"
        case .keyUnavailable(let m): return "key unavailable: \(m)"
        case .policyDenied(let m): return "denied by policy: \(m)"
        case .unknownAccount(let m): return "unknown account: \(m)"
        case .cannotCreateOutput(let m): return "cannot create output: \(m)"
        case .damagedDatabase(let m): return "damaged database: \(m)"
        case .newerVersion(let m): return "written by a newer mamfs: \(m)"
        case .system(let m, let code): return "\(m): \(String(cString: strerror(code)))"
        }
    }

    /// The errno a filesystem should answer for this error (mapping done once, at the FUSE boundary).
    public var errno: Int32 {
        switch self {
        case .authenticationFailed, .failedToDecrypt, .failedToEncrypt, .internalError: return EIO
        case .keyUnavailable, .policyDenied, .unknownAccount, .applicationNotManaged, .unmanagedIdentity: return EACCES
        case .fileNotFound: return ENOENT
        case .operationOnDirectory: return EISDIR
        case .invalidArguments: return EINVAL
        case .cannotCreateOutput, .damagedDatabase, .newerVersion: return EIO
        case .system(_, let code): return code
        }
    }

    /// The exit code the CLI exits with for this error (see `ExitCode` for the table).
    public var exitCode: ExitCode {
        switch self {
        case .invalidArguments: return .usage
        case .authenticationFailed, .failedToDecrypt, .damagedDatabase, .newerVersion: return .dataErr
        case .fileNotFound, .operationOnDirectory: return .noInput
        case .internalError, .failedToEncrypt: return .software
        case .cannotCreateOutput: return .cantCreate
        case .keyUnavailable, .policyDenied, .applicationNotManaged, .unmanagedIdentity, .unknownAccount: return .noPerm
        case .system(_, let code):
            switch code {
            case ENOENT, ENOTDIR: return .noInput
            case EACCES, EPERM: return .noPerm
            case ENOSPC, EDQUOT, EROFS, EEXIST, EMLINK: return .cantCreate
            default: return .ioErr
            }
        }
    }

    /// Builds `.system` from the current `errno`.
    public static func fromErrno(_ what: String) -> MAMError {
        .system(what, errno: Glibc.errno)
    }
}
