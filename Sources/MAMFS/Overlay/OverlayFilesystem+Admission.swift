import Glibc

/// What a request does to the object it names, as the admission decision sees it.
enum Operation: Sendable {
    case lookup
    case checkAccess
    case readAttributes
    case changeAttributes
    case readLink
    /// mknod, mkdir, symlink, create and the target directory of link (the object is the directory).
    case makeEntry
    /// The object a new link is made to.
    case link
    /// unlink, rmdir (the object is the directory).
    case removeEntry
    /// rename (once for each directory).
    case rename
    case open(flags: Int32)
    case read
    case write
    case sync
    case listDirectory
    case readXattr
    case changeXattr
    case changeOwner
}

/// Admission: the one place a request's operation on an object is allowed or refused.
extension OverlayFilesystem {
    /// Decides whether `caller` may do `operation` on `inode`. Every core request that names an
    /// object passes here (through `node(_:for:by:)`, or directly for requests on an open
    /// handle), so a caller-aware policy is decided in this function and nowhere else.
    ///
    /// Today everything is admitted: the kernel's own permission checks (default_permissions,
    /// the backing objects' modes) and the owner-change checks of +OwnerChange stand.
    /// - Throws: nothing yet; a refusal will be `FilesystemError` (EACCES/EPERM).
    @inline(__always)
    func admit(_ operation: Operation, on inode: Inode, by caller: Caller) throws {}

    /// The entry of `nodeid`, admitted for `operation` by `caller`.
    /// - Throws: `FilesystemError` ESTALE when the kernel names a node the table no longer has.
    func node(_ nodeid: UInt64, for operation: Operation, by caller: Caller) throws -> Inode {
        guard let inode = table.inode(nodeid) else { throw FilesystemError(code: ESTALE) }
        try admit(operation, on: inode, by: caller)
        return inode
    }

    /// EPERM/ENOENT (`missing`) for a name the mount kind reserves at the root (a provider
    /// mount's `.mamfs-provider` is not part of the tree programs see).
    func checkVisibleName(_ parent: Inode, _ name: UnsafePointer<CChar>, missing: Bool = false) throws {
        guard parent.nodeid == table.root.nodeid, hooks.isReservedRootName(name) else { return }
        throw FilesystemError(code: missing ? ENOENT : EPERM)
    }
}
