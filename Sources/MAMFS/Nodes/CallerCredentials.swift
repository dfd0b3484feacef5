import Glibc

/// The identity of the process that sent a FUSE request: uid, gid and supplementary groups.
///
/// The daemon runs with its own credentials (often root, for an `allow_other` mount); a check
/// that must hold for the caller uses these instead of access(2), which answers for the daemon.
struct CallerCredentials: Sendable, Equatable {
    let uid: uid_t
    let gid: gid_t
    /// Supplementary groups (without `gid` unless the process lists it).
    let groups: [gid_t]

    init(uid: uid_t, gid: gid_t, groups: [gid_t]) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    func isMember(of group: gid_t) -> Bool { group == gid || groups.contains(group) }
}

/// What a caller needs on one backing object.
enum CallerAccess: Sendable {
    /// Rewriting it: changing the owner of a file (it is re-encrypted or decrypted) or of a
    /// directory (its owner tag).
    case write
    /// Walking into a directory (a recursive owner change reaches what is below it).
    case search
}

extension CallerCredentials {
    /// Whether this caller has `access` to an object with the owner, group and mode of `object`,
    /// decided as the kernel's generic_permission decides on mode bits: uid 0 always; the
    /// owner's bits for its owner, else the group's bits for a member of its group (primary or
    /// supplementary), else the others' bits. POSIX ACLs are not consulted (a denial is the
    /// safe side). The one place owner changes through the mount are allowed or refused.
    func permits(_ access: CallerAccess, on object: stat) -> Bool {
        if uid == 0 { return true }
        let mode = object.st_mode
        let bits: (owner: mode_t, group: mode_t, other: mode_t) = switch access {
        case .write: (S_IWUSR, S_IWGRP, S_IWOTH)
        case .search: (S_IXUSR, S_IXGRP, S_IXOTH)
        }
        if object.st_uid == uid { return mode & bits.owner != 0 }
        if isMember(of: object.st_gid) { return mode & bits.group != 0 }
        return mode & bits.other != 0
    }
}
