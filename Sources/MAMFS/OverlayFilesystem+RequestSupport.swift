import CFuse
import Glibc
import MAMFileProvider
import MAMProtection

/// What the request handlers (OverlayFilesystem+Names, +Directories, +Files, +Xattrs) share,
/// and the lifecycle requests.
extension OverlayFilesystem {
    /// `path` is only evaluated when the error is logged (a readlink per failed lookup otherwise).
    func fail(_ req: fuse_req_t?, _ error: Error, _ inode: Inode? = nil, path: @autoclosure () -> String? = nil) {
        fuse_reply_err(req, errnoCode(error, inode, path: path()))
    }

    func node(_ ino: fuse_ino_t) throws -> Inode {
        guard let inode = table.inode(ino) else { throw FilesystemError(code: ESTALE) }
        return inode
    }

    /// EPERM/ENOENT for the provider's metadata directory at the root of a provider mount
    /// (`.mamfs-provider` is not part of the tree programs see).
    func checkVisibleName(_ parent: Inode, _ name: UnsafePointer<CChar>, missing: Bool = false) throws {
        guard provider != nil, parent.nodeid == table.root.nodeid, MountedProvider.isMetadataName(name) else { return }
        throw FilesystemError(code: missing ? ENOENT : EPERM)
    }

    /// The backing path of `name` in the directory `dir`.
    func childPath(_ dir: Inode, _ name: UnsafePointer<CChar>) throws -> String {
        let parent = try backingPath(dir)
        return (parent == "/" ? "" : parent) + "/" + String(cString: name)
    }

    /// Materializes `inode` when it is a placeholder of a non-replicated provider mount:
    /// `startProvidingItem` under the exclusive content lock, then the entry is pointed at the
    /// provided file (it replaced the placeholder by rename).
    func materializeIfPlaceholder(_ inode: Inode) throws {
        guard let provider, provider.nonReplicated != nil, inode.isRegular else { return }
        var st = stat()
        guard fstatat(inode.fd, "", &st, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0, st.st_size == 0 else { return }
        try inode.contentLock.writing {
            let path = try backingPath(inode)
            if try provider.materialize(path: path) { repoint(inode, toPath: path) }
        }
    }

    /// A file written through a provider mount was closed, fsynced or truncated. Non-replicated:
    /// the upload is queued behind earlier provider work and finds the file by its entry (the
    /// path it has when the upload runs, after any rename; nothing when it was removed), so a
    /// close followed at once by a rename never uploads under a stale name. `wait` (fsync)
    /// returns once it is done.
    func providerFileChanged(_ inode: Inode, wait: Bool = false) {
        guard let provider else { return }
        guard provider.nonReplicated != nil else {
            provider.fileChanged(path: "")
            return
        }
        provider.enqueue(wait: wait) { [self] in
            DescriptorCache.withPins {
                inode.contentLock.reading {
                    var st = stat()
                    guard fstatat(inode.fd, "", &st, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0, st.st_nlink > 0,
                          let path = try? backingPath(inode) else { return }
                    provider.fileChanged(path: path)
                }
            }
        }
    }

    func replyEntry(_ req: fuse_req_t?, _ inode: Inode, _ st: stat) {
        var e = entryParameters(inode, st)
        if fuse_reply_entry(req, &e) != 0 { table.forget(inode.nodeid, count: 1) }
    }

    // MARK: Lifecycle

    func initialize(_ conn: UnsafeMutablePointer<fuse_conn_info>) {
        // Requests of up to 1 MiB. libfuse 3.14 has no FUSE_CAP_MAX_PAGES to ask for: it answers
        // the kernel's FUSE_MAX_PAGES with max_pages = max_write / page size (at most its 1 MiB
        // buffer), so max_write sets the size of direct-I/O reads too. max_read is left as
        // libfuse set it (0 = no limit, or the -o max_read mount option, which it must match);
        // a smaller -o max_write still wins.
        conn.pointee.max_write = 1 << 20
        if let connectionOptions { fuse_apply_conn_info_opts(connectionOptions, conn) }
        // Writes go through to us (no writeback cache), so O_APPEND and sizes stay ours.
        conn.pointee.want &= ~UInt32(FUSE_CAP_WRITEBACK_CACHE)
    }
}
