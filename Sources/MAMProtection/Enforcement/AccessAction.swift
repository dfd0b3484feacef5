import Foundation

/// What a caller asks to do with an object, in the terms the caller-aware rules decide on.
///
/// The mount maps FUSE requests onto these (open, create, rename/link, setxattr of the owner,
/// lookup/stat/readdir/getxattr); the CLI maps `protect`, `decrypt` onto `.declassify`.
public enum AccessAction: Sendable, Hashable {
    /// Open an existing file without truncation: `reading` for O_RDONLY and O_RDWR, `writing`
    /// for O_WRONLY and O_RDWR (an O_RDWR open reads, so it receives a personal file's data).
    case open(reading: Bool, writing: Bool)
    /// Create a file, or open one with O_TRUNC: its content is new and gets an owner from the
    /// writer's identity (`AccessDecision.newOwner`).
    case create
    /// Create, rename or link a file owned by a managed account into `into` (the location of
    /// the target path).
    case save(into: StorageLocation)
    /// Change the owner of a file owned by a managed account to `newOwner` ("" unmanaged, or
    /// another accountId): the owner xattr, `mamfs protect`, `mamfs decrypt` in place or to a copy.
    case declassify(newOwner: String)
    /// Lookup, stat, readdir, getxattr: always allowed.
    case metadata

    /// A short name for the audit log: "open-read", "open-write", "open-readwrite", "create",
    /// "save", "declassify", "metadata".
    public var auditName: String {
        switch self {
        case .open(let reading, let writing): return reading && writing ? "open-readwrite" : writing ? "open-write" : "open-read"
        case .create: return "create"
        case .save: return "save"
        case .declassify: return "declassify"
        case .metadata: return "metadata"
        }
    }
}
