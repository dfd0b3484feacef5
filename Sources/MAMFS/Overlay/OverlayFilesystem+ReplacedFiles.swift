import Glibc
import MAMProtection
import MAMSystem

/// What becomes of an entry whose backing file another file replaced under its name
/// (protect, a download, a materialized placeholder: written aside and renamed over it).
enum ReplacedFileHandles {
    /// The new file holds the old one's plaintext and the old one has no name left (mamfs
    /// encrypted it before a write, or an owner change through the mount rewrote it): the entry
    /// moves, and every handle open on the old file follows it (`followReplacement`), so the
    /// node's page cache stays one file's and nothing written after is left in an unlinked file.
    case follow
    /// The entry moves; handles open on the old file stay there (an empty placeholder being
    /// materialized for the open that asked: nothing of it to keep apart).
    case moveEntry
    /// The entry stays with the old file and its handles, and the name gets an entry (a nodeid)
    /// of its own at its next lookup (`supersede`): for a file another hard link still names
    /// (the entries of hard links are one, so moving it would move the other names too).
    case keepApart
}

/// Entries whose backing file was replaced under their name.
///
/// One entry is one kernel node, and the kernel keeps one page cache per node. An entry
/// moved to a new file while a handle stays open on the old one would have two files share
/// it: the old handle's reads and maps would see the new file's bytes (managed bytes, after
/// protect, reaching a handle on a personal hard link), and its writes would show, and be
/// written back, as the new file's. So an entry moves only where mamfs itself replaced the file
/// by a known name and every handle follows it (the same plaintext, no other name for the old
/// file); otherwise it stays with the old file and its handles, as a descriptor does on any
/// file system when another file is renamed over its name, and the kernel is told to look the
/// name up again.
extension OverlayFilesystem {
    /// Entries whose file was replaced outside the mount's own calls (the CLI's protect on a
    /// backing path, a provider pass) are superseded: the kernel is told to look their names
    /// up again, and finds whatever file each name has now. They are never moved: which of an
    /// unlinked file's former names was replaced, and by what, cannot be known here (a name
    /// recorded from a hard link may hold an unrelated file by now), and a new lookup needs no
    /// guess. Entries whose descriptor is closed are not opened for this: they find their
    /// object again by name, and one replaced under its name answers ESTALE until looked up
    /// again. A file whose last name an unlink or rename through the mount removed was not
    /// replaced and is left alone.
    func supersedeReplacedEntries() {
        for inode in table.all where inode.isRegular && !inode.isSuperseded && !inode.isUnlinked {
            DescriptorCache.withPins {
                guard let fd = table.descriptors.openDescriptor(of: inode), (try? SystemCall.stat(fd: fd))?.st_nlink == 0 else { return }
                supersede(inode, names: formerNames(inode, fd: fd))
            }
        }
    }

    /// The backing paths `inode`'s unlinked file may still be cached under in the kernel: the
    /// name its descriptor `fd` was opened by, and its recorded name (what the kernel last
    /// found it as). Only for invalidation: neither is trusted to name a replacement.
    private func formerNames(_ inode: Inode, fd: Int32) -> [String] {
        var names: [String] = []
        if let (path, deleted) = try? ProcessDescriptorPath.currentPath(of: fd), deleted { names.append(path) }
        if let record = table.descriptors.recordedName(of: inode), let parent = try? backingPath(record.parent),
           let name = record.name.withUnsafeBufferPointer({ String(validatingCString: $0.baseAddress!) }) {
            let path = PathName.appending(name, to: parent)
            if !names.contains(path) { names.append(path) }
        }
        return names
    }

    /// After an owner change of the directory at backing `path` through the mount: the regular
    /// files below it that have entries, each with the path it had just before (checked to
    /// name its own file), so that those the change rewrote can be followed by name.
    func filesBelow(_ path: String) -> [(Inode, String)] {
        var found: [(Inode, String)] = []
        for inode in table.all where inode.isRegular && !inode.isSuperseded {
            DescriptorCache.withPins {
                // backingPath: by another name of the file when the one its descriptor was
                // opened by is gone (a hard link).
                guard table.descriptors.openDescriptor(of: inode) != nil,
                      let filePath = try? backingPath(inode), PathName.relative(filePath, below: path) != nil else { return }
                found.append((inode, filePath))
            }
        }
        return found
    }

    /// Points `inode` at whatever regular file is now at `path` (see `ReplacedFileHandles` for
    /// its open handles), or, with `.keepApart`, leaves it on its file and has the kernel look
    /// `path`'s name up again (`supersede`). `path` must be the name mamfs itself just had
    /// the file replaced under. Call under the entry's exclusive content lock.
    func repoint(_ inode: Inode, toPath path: String, handles: ReplacedFileHandles) {
        // Below the backing root without crossing a symlink: a name swapped meanwhile never
        // points the entry (and its handles) at an object elsewhere.
        guard let replacement = try? openConfined(path, SystemConstants.pathOnly | O_CLOEXEC),
              let st = try? replacement.stat(), (st.st_mode & S_IFMT) == S_IFREG else { return }
        guard BackingKey(st) != inode.key else {
            // Rewritten in place: same descriptor, new header (no dup: that kept one more
            // descriptor per protect until the entry went away).
            readHeaderAfterOwnRewrite(inode)
            return
        }
        // A rewrite keeps the file's owner, group and mode: a file under the name without them
        // is not the rewrite's (another file renamed there meanwhile, directly in the backing
        // directory), and the entry and its handles stay where they are.
        let old = try? SystemCall.stat(fd: inode.descriptor())
        guard let old, st.st_uid == old.st_uid, st.st_gid == old.st_gid, st.st_mode == old.st_mode else {
            supersede(inode, names: [path])
            return
        }
        if handles == .keepApart {
            supersede(inode, names: [path])
            return
        }
        if handles == .follow { inode.markReplacedByCopy(inode.key) }
        // The table takes the descriptor only when it repoints the entry.
        guard table.repoint(inode, to: st, fd: replacement.rawValue) else { return }
        _ = replacement.take()
        readHeaderAfterOwnRewrite(inode)
        // The kernel may hold the old file's attributes (a link count of 0) for this node.
        attributesChanged?(inode.nodeid)
    }

    /// Leaves `inode` with its file and its open handles, and tells the kernel that the names
    /// (backing paths) `names` no longer lead to it: the next lookup of each makes an entry for
    /// the file there now. Until the kernel has dropped them (the invalidation is sent from a
    /// thread of its own: the kernel takes the directory's lock for it, which a request waiting
    /// on this one may hold), requests that reach the old entry by name find it superseded
    /// (`requireCurrent`).
    private func supersede(_ inode: Inode, names: [String]) {
        guard inode.markSuperseded() else { return }
        for path in names {
            var st = stat()
            guard lstat(parentPath(path), &st) == 0, let parent = table.existing(BackingKey(st)) else { continue }
            nameReplaced?(parent.nodeid, PathName.lastComponent(of: path))
        }
    }

    /// ESTALE for a request that reaches by name an entry whose file was replaced under that
    /// name and has no name left (a superseded entry of an unlinked file): the kernel then
    /// looks the name up again and repeats the call on the new entry, as it does for NFS (open,
    /// the xattr calls, access and link retry once on ESTALE). Used for those calls only: the
    /// kernel sends the xattr calls of a descriptor (fgetxattr) without its handle, so they
    /// get ESTALE on a descriptor left on such a file, while attribute reads and changes
    /// (fstat, fchmod, fchown, futimens) answer for its own file. A superseded entry whose
    /// file still has another hard link goes on answering for that name.
    func requireCurrent(_ inode: Inode) throws {
        guard inode.isSuperseded else { return }
        guard let st = try? SystemCall.stat(fd: try inode.descriptor()), st.st_nlink > 0 else { throw FilesystemError(code: ESTALE) }
    }

    /// After an owner change through the mount, before its reply: waits (100 ms at most) until
    /// the kernel has dropped the names it gave new files (`supersede`), so the caller's next
    /// call by that name finds the new file also where the old one keeps another name. Bounded,
    /// not whole: the kernel's drop may wait for the directory's lock, which a request waiting
    /// on this reply may hold. Call with no lock held.
    func settleNameInvalidations() {
        nameInvalidationsSettle?(0.1)
    }

    /// How the handles of an entry whose file an owner change through the mount just replaced
    /// (the same plaintext under a new header) go on: they follow the entry when the old file
    /// has no name left; when another hard link still names it, they stay with it (a handle
    /// may have been opened by that name: the entries of hard links are one).
    func handlesAfterOwnerChange(_ inode: Inode) -> ReplacedFileHandles {
        guard let fd = try? inode.descriptor(), (try? SystemCall.stat(fd: fd))?.st_nlink == 0 else { return .keepApart }
        return .follow
    }

    /// Moves `handle` to its entry's current file when the file it is open on was replaced by
    /// a copy of its plaintext (`ReplacedFileHandles.follow`); other handles stay as they are.
    /// Call under the entry's content lock.
    /// - Throws: ESTALE when the current file cannot be opened.
    func followReplacement(_ handle: OpenFile) throws {
        let inode = handle.inode
        guard handle.backingKey != inode.key, inode.isReplacedByCopy(handle.backingKey) else { return }
        // A write-only handle's descriptor keeps O_NOATIME (`reopenBacking`).
        let noAccessTime = fcntl(handle.fd, F_GETFL) & SystemConstants.noAccessTime != 0
        let reopened = try reopenBacking(inode, (handle.writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, noAccessTime: noAccessTime)
        let st = try reopened.stat()
        guard BackingKey(st) == inode.key else { throw FilesystemError(code: ESTALE) }
        handle.follow(fd: reopened.take(), key: BackingKey(st))
    }
}
