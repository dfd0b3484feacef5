import Glibc

/// An entry a rewrite works on: `directory` is an open directory (borrowed), `name` one
/// component in it. Every step (open with O_NOFOLLOW, the temp file, the rename over it) is
/// relative to the descriptor, so no path is resolved again and no symlink followed there.
/// `path` names the entry in messages only.
struct NameInDirectory {
    let directory: Int32
    let name: String
    let path: String

    /// Throws EINVAL unless `name` is one component: not empty, ".", "..", and without a "/"
    /// byte (which the kernel would resolve through, following a symlink on the way).
    static func requireComponent(_ name: String, path: String) throws {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes != [0x2E], bytes != [0x2E, 0x2E], !bytes.contains(0x2F) else {
            throw MAMError.system("\(path): not a single name", errno: EINVAL)
        }
    }
}

/// What a protect shows its `ProtectCheck` before it changes or enters it.
public enum ProtectedObject: Equatable, Sendable {
    /// The object the protect was asked for (a file, or the directory it tags first).
    case target
    /// A regular file below the target, about to be rewritten.
    case file
    /// A directory below the target, about to be entered (and, when `tagged`, tagged anew).
    case directory(tagged: Bool)
}

/// Called by `FileProtectionManager`'s descriptor-based protect with each object and its
/// fstat, taken on the very descriptor the protect then reads, tags or walks (so a name
/// swapped after an earlier check cannot slip in). Throwing stops the protect there: what was
/// done before stays done, nothing more is changed, and the error reaches the caller as is.
/// The mount uses it to check the caller's credentials (`mamfs` run as the user needs none).
public typealias ProtectCheck = (_ object: ProtectedObject, _ st: stat) throws -> Void
