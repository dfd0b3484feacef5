import Glibc
import MAMProtection
import Synchronization

/// What a request does to the object it names, as the admission decision sees it.
enum Operation {
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
    /// open(2) with `flags`, of the file whose owner is `owner`.
    case open(flags: Int32, owner: OwnerToDecide)
    case read
    case write
    case sync
    case listDirectory
    case readXattr
    case changeXattr
    /// Writing `user.mam.owner` with the value `to` (the object is the file or directory).
    case changeOwner(to: String)
    /// A regular file `name` is to be created in the directory (create, mknod of a file).
    case createFile(name: UnsafePointer<CChar>)
    /// The entry `name` of the directory is to be renamed to `newName` in `into`.
    case moveEntry(name: UnsafePointer<CChar>, into: Inode, newName: UnsafePointer<CChar>)
    /// The object is to get the new link `name` in `into`.
    case linkInto(Inode, name: UnsafePointer<CChar>)
    /// A symlink, FIFO, socket or device `name` is to be made in the directory.
    case makeSpecial(name: UnsafePointer<CChar>)
}

/// The owner an open is decided for.
enum OwnerToDecide {
    /// The owner tag of the header the handle is opened on (nil: untagged), read under the
    /// entry's exclusive content lock: the decision and the handle see the same file (a
    /// placeholder is decided by the file it became, a file rewritten behind the mount by its
    /// new header).
    case tag(String?)
    /// Not read yet (truncate(2) by name): the decision reads the header.
    case unread
}

/// What admission hands back to the request: for a create or an O_TRUNC open, the owner the
/// new content gets (nil: the owner mamfs gives without caller-aware rules).
struct Admission {
    var newOwner: String?
    static let unchanged = Admission(newOwner: nil)
}

/// Admission: the one place a request's operation on an object is allowed or refused.
extension OverlayFilesystem {
    /// Decides whether `caller` may do `operation` on `inode`. Every core request that names an
    /// object passes here (through `node(_:for:by:)`, or directly for requests on an open
    /// handle), so a caller-aware policy is decided in this function and nowhere else.
    ///
    /// While no managed account's policy has a `protectionLevel` other than off
    /// (`isEnforcing`), everything is admitted without reading anything (the kernel's own
    /// permission checks and the owner-change checks of +OwnerChange stand). Otherwise opens,
    /// creates, renames, links and owner changes are decided by `AccessRules` for the caller's
    /// executable (+Enforcement); reads, writes and metadata requests on what was admitted
    /// are not decided again.
    /// - Returns: the owner of new content for `.createFile` and O_TRUNC opens.
    /// - Throws: `FilesystemError` EACCES for a denial, EPERM for a denied declassify.
    @inline(__always) @discardableResult
    func admit(_ operation: Operation, on inode: Inode, by caller: Caller) throws -> Admission {
        switch operation {
        case .open, .createFile, .moveEntry, .linkInto, .makeSpecial, .changeOwner:
            guard isEnforcing else { return .unchanged }
            return try decideAccess(operation, on: inode, by: caller)
        default:
            return .unchanged
        }
    }

    /// Whether any managed account's policy enables caller-aware rules (level block or
    /// audit); updated when the state changes (`refresh`).
    var isEnforcing: Bool { enforcing.load(ordering: .relaxed) }

    /// The entry of `nodeid`, admitted for `operation` by `caller`.
    /// - Throws: `FilesystemError` ESTALE when the kernel names a node the table no longer has,
    ///   or, for a call that reaches the object by name (access, the xattr calls, link), an
    ///   entry whose name another file took (`requireCurrent`).
    func node(_ nodeid: UInt64, for operation: Operation, by caller: Caller) throws -> Inode {
        guard let inode = table.inode(nodeid) else { throw FilesystemError(code: ESTALE) }
        switch operation {
        // Calls that reach an object by name: a name another file replaced is looked up again.
        case .checkAccess, .readXattr, .changeXattr, .link: try requireCurrent(inode)
        default: break
        }
        try admit(operation, on: inode, by: caller)
        return inode
    }

    /// EPERM/ENOENT (`missing`) for a name the mount kind reserves at the root (a provider
    /// mount's `.mamfs-provider` is not part of the tree programs see).
    ///
    /// A new name (`missing` false) of the form of the providers' temp files is EPERM on a
    /// provider mount: both providers skip such names, so a file made under one would never
    /// be synced, without a word (`ProviderNames.isTemporaryName`). (EPERM, not EINVAL, which
    /// mv(1) reports as a move into a subdirectory of itself.)
    func checkVisibleName(_ parent: Inode, _ name: UnsafePointer<CChar>, missing: Bool = false) throws {
        if !missing, options.provider != nil, ProviderNames.isTemporaryName(name) { throw FilesystemError(code: EPERM) }
        guard parent.nodeid == table.root.nodeid, hooks.isReservedRootName(name) else { return }
        throw FilesystemError(code: missing ? ENOENT : EPERM)
    }
}
