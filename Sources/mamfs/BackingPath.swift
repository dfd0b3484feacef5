import MAMFS
import MAMProtection

/// Maps a path inside a running `mamfs mount` to the same path in the mount's backing
/// directory (see `MountTable`), for the verbs that must work on the backing files.
///
/// One value holds one reading of the mount table (/proc/self/mountinfo): a verb takes it
/// once and maps all its paths with it, so a command reads the table once, not once per path.
struct BackingPath {
    private let table: MountTable

    /// The mount table now; without /proc, no mamfs mounts.
    static func current() -> BackingPath {
        BackingPath(table: MountTable.current() ?? MountTable(MountInfo(entries: [])))
    }

    /// `path` made absolute with its directory resolved (the last component is not followed,
    /// so a symlink is meant as itself), then mapped into the backing directory of the
    /// innermost mamfs mount holding it; paths outside every mamfs mount come back resolved
    /// but otherwise unchanged. The provider verbs use it: the provider root, with its hidden
    /// `.mamfs-provider`, is in the backing directory.
    func resolve(_ path: String) -> String {
        table.resolvedBackingPath(path)
    }

    /// For the file verbs (protect, info, encrypt, decrypt): `path` unchanged when it is outside
    /// every mamfs mount, else the same file in the mount's backing directory. Through a mount
    /// every file reads as plaintext, so working on the mount path would tag or encrypt the
    /// plaintext view; the backing file is the protected one (a running mount picks up changes).
    func forFileVerb(_ path: String) -> String {
        guard !table.mounts.isEmpty else { return path }
        return table.backingPath(of: MountTable.resolvedPath(path)) ?? path
    }

    /// `current().resolve(path)`, for a verb with one path.
    static func resolve(_ path: String) -> String { current().resolve(path) }

    /// `current().forFileVerb(path)`, for a verb with one path.
    static func forFileVerb(_ path: String) -> String { current().forFileVerb(path) }
}
