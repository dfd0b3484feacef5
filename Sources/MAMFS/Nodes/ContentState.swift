import Glibc
import MAMProtection

/// What an entry knows of its backing file's protected-file header and file key.
///
/// `unknown`: nothing read since the entry was made, repointed or invalidated (protect
/// rewrote the file). `known`: the header as read (nil = a file without one), the backing
/// ctime when it was read (`stamp`, to notice changes made behind the mount), and the file
/// key, valid for state generation `keyGeneration` (0 = no key loaded yet).
enum ContentState: Sendable {
    case unknown
    case known(header: ProtectedFileHeader?, stamp: timespec, key: SymmetricKey?, keyGeneration: UInt64)

    /// The state after reading `header` at ctime `stamp`: the key stays only while the header
    /// is the same one it was derived from.
    func storing(header: ProtectedFileHeader?, stamp: timespec) -> ContentState {
        if case .known(let old, _, let key, let generation) = self, old == header {
            return .known(header: header, stamp: stamp, key: key, keyGeneration: generation)
        }
        return .known(header: header, stamp: stamp, key: nil, keyGeneration: 0)
    }

    /// The state with `key` loaded in `generation`; a key for an unknown header is not kept.
    func storing(key: SymmetricKey?, generation: UInt64) -> ContentState {
        guard case .known(let header, let stamp, _, _) = self else { return self }
        return .known(header: header, stamp: stamp, key: key, keyGeneration: generation)
    }

    /// Whether the header is known and still describes the backing file: while a handle is
    /// open it is trusted (the mount's own writes move the ctime; a rewrite behind the mount is
    /// noticed by opens and by requests through handles, `OverlayFilesystem+RewrittenFiles`);
    /// otherwise its ctime must equal `stamp`.
    func isCurrent(ctime: timespec?, handlesOpen: Bool) -> Bool {
        guard case .known(_, let stamp, _, _) = self else { return false }
        if handlesOpen { return true }
        guard let ctime else { return false }
        return ctime.tv_sec == stamp.tv_sec && ctime.tv_nsec == stamp.tv_nsec
    }

    /// True when the header is known and present: the file is tagged, and a write through
    /// its entry cannot reach bytes 0 ..< 8 (see `OverlayFilesystem.untaggedPrefixLock`).
    var isKnownTagged: Bool {
        if case .known(let header, _, _, _) = self { return header != nil }
        return false
    }

    /// True when a header (or its absence) is known and it is not `header`.
    func isKnown(other header: ProtectedFileHeader?) -> Bool {
        if case .known(let known, _, _, _) = self { return known != header }
        return false
    }

    /// True once a header (or its absence) was read and not invalidated since.
    var isKnown: Bool {
        if case .known = self { return true }
        return false
    }
}
