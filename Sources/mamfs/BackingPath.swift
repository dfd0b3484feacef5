import MAMFS
import MAMProtection

/// Maps a path inside a running `mamfs mount` to the same path in the mount's backing
/// directory (see `MountTable`), for the verbs that must work on the backing files.
enum BackingPath {
    /// `path` made absolute with its directory resolved (the last component is not followed,
    /// so a symlink is meant as itself), then mapped into the backing directory of the
    /// innermost mamfs mount holding it; paths outside every mamfs mount come back resolved
    /// but otherwise unchanged. The provider verbs use it: the provider root, with its hidden
    /// `.mamfs-provider`, is in the backing directory.
    static func resolve(_ path: String) -> String {
        table().resolvedBackingPath(path)
    }

    /// For the file verbs (protect, info, encrypt, decrypt): `path` unchanged when it is outside
    /// every mamfs mount, else the same file in the mount's backing directory. Through a mount
    /// every file reads as plaintext, so working on the mount path would tag or encrypt the
    /// plaintext view; the backing file is the protected one (a running mount picks up changes).
    static func forFileVerb(_ path: String) -> String {
        let mounts = table()
        guard !mounts.mounts.isEmpty else { return path }
        return mounts.backingPath(of: MountTable.resolvedPath(path)) ?? path
    }

    /// The mount table now; without /proc, no mamfs mounts.
    private static func table() -> MountTable {
        MountTable.current() ?? MountTable(MountInfo(entries: []))
    }
}
