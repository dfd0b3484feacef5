import Glibc

/// How deep the walks over a directory tree go: a recursive protect and its look before it,
/// the mount's check of a directory's owner change, a wipe. Each level holds an open
/// descriptor and a stack frame (on a FUSE worker thread: 8 MiB of stack), so a tree a user
/// made deep enough would otherwise crash the daemon or the command. Below 1,024 levels every
/// path is longer than PATH_MAX (4,096 bytes) for names of 3 bytes or more; no program can
/// name such a file by its path anyway.
public enum TreeDepth {
    /// Directory levels below a walk's root that a walk enters at most.
    public static let maximum = 1024

    /// The error for a walk that would enter `path`, more than `maximum` levels below its top
    /// (the reason first: a message naming such a path is cut when printed).
    public static func tooDeep(_ path: String) -> MAMError {
        .system("more than \(maximum) directory levels below the top of the walk, not walked: \(path)", errno: ENAMETOOLONG)
    }
}
