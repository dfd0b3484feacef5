import Foundation
import MAMProtection

/// What one sync pass (or placeholder refresh) did. Counts are items; `errors` lists every
/// item that was not brought in sync, with its local path (relative to the root) — those are
/// retried by the next pass. Codable for `--json`.
public struct SyncReport: Codable, Equatable, Sendable {
    /// Remote contents fetched into the local root (new or changed items; directories and
    /// symlinks included).
    public var fetched = 0
    /// Non-replicated: placeholders created or refreshed.
    public var placeholders = 0
    /// Local items removed because they were deleted on the remote.
    public var deletedLocally = 0
    /// Local items moved because they were renamed or moved on the remote.
    public var movedLocally = 0
    /// New local items uploaded (createItem).
    public var created = 0
    /// Changed local items uploaded (modifyItem).
    public var modified = 0
    /// Remote items deleted because they were deleted locally (deleteItem).
    public var deletedRemotely = 0
    /// Remote items moved because they were renamed or moved locally (metadata only).
    public var movedRemotely = 0
    /// Items changed on both sides: both kept, the local one under a conflict name.
    public var conflicts = 0
    /// Local items not uploaded because the domain's account may not receive them.
    public var refused = 0
    /// Problems, one per item (or one for the whole pass when the remote is unreachable).
    public var errors: [SyncIssue] = []
    /// False when the pass stopped early (remote unreachable, read-only...): run it again.
    public var complete = true
    /// The sync anchor after the pass (number of completed passes).
    public var anchor: Int64 = 0

    public init() {}

    /// True when nothing went wrong.
    public var isClean: Bool { errors.isEmpty && complete }
}

/// One item the pass could not bring in sync.
public struct SyncIssue: Codable, Equatable, Sendable, CustomStringConvertible {
    /// Local path relative to the root ("" = the whole root).
    public var path: String
    /// Human message.
    public var message: String
    /// The errno the condition maps to (EACCES for a policy refusal, EHOSTUNREACH for an
    /// unreachable remote, EROFS for a read-only one, ...).
    public var errno: Int32

    public init(path: String, error: any Error) {
        self.path = path
        let mapped = ProviderError.mam(error)
        self.message = mapped.description
        self.errno = mapped.errno
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Progress of a pass, for a progress line on a terminal or `--json` progress lines.
///
/// `done` and `bytesDone` never go down within a pass; `total` and `bytesTotal` are what the
/// pass expects so far: they grow while the trees are walked (a non-replicated pass adds the
/// remote items when it starts refreshing placeholders) and `bytesTotal` is corrected to the
/// bytes actually moved as each transfer ends (a local file's expected size is its stat size,
/// which for an encrypted file is larger than the plain bytes that go up). Both are always at
/// least `done` / `bytesDone`.
public struct SyncProgress: Equatable, Sendable {
    /// Items handled so far in this pass.
    public var done: Int
    /// Items the pass expects to look at.
    public var total: Int
    /// Content bytes moved so far (plain bytes uploaded to or downloaded from the remote;
    /// directories, symlinks and placeholders move none).
    public var bytesDone: Int64
    /// Content bytes the pass expects to move: sizes from the remote listing for contents to
    /// fetch, from a local stat for contents to upload.
    public var bytesTotal: Int64
    /// The local path (relative to the root) just handled.
    public var path: String

    public init(done: Int, total: Int, bytesDone: Int64 = 0, bytesTotal: Int64 = 0, path: String) {
        self.done = done
        self.total = total
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.path = path
    }
}

/// Converts the errors of this module to `MAMError` (the type the CLI and the mount map to
/// exit codes and errno).
enum ProviderError {
    static func mam(_ error: any Error) -> MAMError {
        if let error = error as? MAMError { return error }
        if let error = error as? RemoteError { return error.mamError }
        return .internalError(String(describing: error))
    }

    /// Runs `body`, rethrowing every error as `MAMError`.
    static func mapped<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw mam(error) }
    }
}
