import Glibc

/// The extended attributes a mount does not carry. get, set and remove answer EOPNOTSUPP, as a
/// filesystem without them does (ext4 mounted `noacl`, a kernel without the security module),
/// and list leaves them out, whatever the backing object holds:
///
/// - POSIX ACLs, `system.posix_acl_access` and `system.posix_acl_default`: the mount does not
///   negotiate FUSE_POSIX_ACL, so the kernel would not apply an ACL on the mount, while passed
///   through to the backing object it would take effect there (on the daemon's own opens).
/// - Security-module labels, `security.selinux` and `security.SMACK64*`: on a host running the
///   module the kernel answers for the mount itself (it labels a FUSE mount by its own rules)
///   and never asks the daemon; on a host without it, a label is inert bytes of the backing file.
///
/// "Not supported" rather than ENODATA lets programs that ask for every file remember the answer
/// for the whole mount: `ls -l` (coreutils, through gnulib's `file_has_acl` and libselinux's
/// `lgetfilecon`) marks the device as lacking ACLs and labels after the first EOPNOTSUPP, so a
/// cold `ls -lR` of N entries costs 2 GETXATTR round trips, not 2N. Other namespaces
/// (`user.*`, `trusted.*`, `security.capability`, ...) pass through to the backing object.
enum UnkeptAttribute {
    private static let exactNames: [[UInt8]] = [
        Array("system.posix_acl_access".utf8),
        Array("system.posix_acl_default".utf8),
        Array("security.selinux".utf8),
    ]
    private static let prefixes: [[UInt8]] = [
        Array("security.SMACK64".utf8),
    ]

    /// Whether the mount answers EOPNOTSUPP for `name` (its bytes, without the NUL).
    static func contains(_ name: UnsafeRawBufferPointer) -> Bool {
        for exact in exactNames where name.elementsEqual(exact) { return true }
        for prefix in prefixes where name.count >= prefix.count && name.prefix(prefix.count).elementsEqual(prefix) {
            return true
        }
        return false
    }

    /// Whether the mount answers EOPNOTSUPP for the NUL-terminated `name` the kernel sent.
    static func contains(cName name: UnsafePointer<CChar>) -> Bool {
        contains(UnsafeRawBufferPointer(start: name, count: strlen(name)))
    }
}
