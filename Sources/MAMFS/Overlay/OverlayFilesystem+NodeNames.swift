import CFuse
import Glibc
import MAMSystem

/// Keeping the recorded (parent, name) of entries current, so an entry whose descriptor the
/// cache closed finds its object again (DescriptorCache), and undoing what a request whose
/// reply the kernel refused made.
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
        guard let inode else { return }
        table.descriptors.nameRemoved(inode, parent: dir, name: name)
        markIfUnlinked(inode)
    }

    /// Marks `inode` as removed (`Inode.markUnlinked`) when the name just taken from it was its
    /// file's last: `supersedeReplacedEntries` must not take it for a file replaced under the
    /// name, which another file may have by now.
    private func markIfUnlinked(_ inode: Inode) {
        guard inode.isRegular, let fd = table.descriptors.openDescriptor(of: inode) else { return }
        if (try? SystemCall.stat(fd: fd))?.st_nlink == 0 { inode.markUnlinked() }
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
                markIfUnlinked(replaced)
            }
        }
        if let moving { table.descriptors.setName(moving, parent: to, name: newName) }
    }

    /// The kernel did not take the entry of an object a request made (the request was
    /// interrupted): the lookup is forgotten and the object removed again (an entry that lives
    /// on, another link's, keeps its descriptor: its recorded name is gone).
    func abandon(_ made: MadeEntry) {
        table.forget(made.entry.nodeid, count: 1)
        made.made?.remove()
        made.name.withUnsafeBufferPointer { name in
            guard let name = name.baseAddress else { return }
            table.descriptors.nameRemoved(made.entry.inode, parent: made.directory, name: name)
        }
    }

    /// The kernel did not take an entry reply (lookup): the lookup is forgotten.
    func abandon(_ entry: Entry) {
        table.forget(entry.nodeid, count: 1)
    }
}
