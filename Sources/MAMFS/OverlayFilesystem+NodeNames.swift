import CFuse
import Glibc

/// Keeping the recorded (parent, name) of entries current, so an entry whose descriptor the
/// cache closed finds its object again (DescriptorCache), and replies for objects a request made.
extension OverlayFilesystem {
    /// The entry of the object `name` in `dir` names now, with its descriptor open and pinned
    /// for this request (it must outlive the removal of the name); nil when there is none.
    func entryBeforeRemoval(_ dir: Inode, _ name: UnsafePointer<CChar>, opening: Bool = true) -> Inode? {
        var st = stat()
        guard fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, let inode = table.existing(BackingKey(st)) else { return nil }
        if opening { _ = try? inode.descriptor() }
        return inode
    }

    /// After `name` was removed from `dir` (unlink, rmdir).
    func recordRemoval(_ inode: Inode?, dir: Inode, name: UnsafePointer<CChar>) {
        if let inode { table.descriptors.nameRemoved(inode, parent: dir, name: name) }
    }

    /// The entries a rename of `name` in `from` to `newName` in `to` moves and replaces (only a
    /// replaced one needs its descriptor open: a moved one is found by its new name).
    func entriesBeforeRename(_ from: Inode, _ name: UnsafePointer<CChar>, _ to: Inode, _ newName: UnsafePointer<CChar>,
                             exchange: Bool) -> (moving: Inode?, replaced: Inode?) {
        (entryBeforeRemoval(from, name, opening: false), entryBeforeRemoval(to, newName, opening: !exchange))
    }

    /// After a successful rename: the moved entry is known by its new name; an exchanged one by
    /// the old name; a replaced one lost its name (unless it is the moved object itself: a
    /// rename onto another link of the same file changes nothing).
    func recordRename(_ entries: (moving: Inode?, replaced: Inode?), from: Inode, name: UnsafePointer<CChar>,
                      to: Inode, newName: UnsafePointer<CChar>, exchange: Bool) {
        let (moving, replaced) = entries
        if let moving, moving === replaced, !exchange { return }
        if let replaced {
            if exchange {
                table.descriptors.setName(replaced, parent: from, name: name)
            } else {
                table.descriptors.nameRemoved(replaced, parent: to, name: newName)
            }
        }
        if let moving { table.descriptors.setName(moving, parent: to, name: newName) }
    }

    /// Replies with the entry of an object this request made as `name` in `dir`; when the kernel
    /// did not take the reply (the request was interrupted), the object is removed again (an
    /// entry that lives on, another link's, keeps its descriptor: its recorded name is gone).
    func replyMade(_ req: fuse_req_t?, _ inode: Inode, _ st: stat, _ made: MadeObject?, dir: Inode, name: UnsafePointer<CChar>) {
        var e = entryParameters(inode, st)
        if fuse_reply_entry(req, &e) != 0 {
            table.forget(inode.nodeid, count: 1)
            made?.remove()
            table.descriptors.nameRemoved(inode, parent: dir, name: name)
        }
    }
}
