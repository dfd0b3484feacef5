import CFuse
import Glibc

/// Sending replies to FUSE requests, and undoing what a reply the kernel refused (the request
/// was interrupted: fuse_reply_* != 0) would have handed over.
enum Reply {
    /// Which object an error is about, for the log line of an authentication failure or an
    /// unavailable key (the backing path, never keys).
    enum Subject {
        case none
        case node(UInt64)
        case inode(Inode)
        /// `name` in the directory `parent` (not in the table yet, as in lookup).
        case child(UInt64, UnsafePointer<CChar>)
    }

    static func error(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ error: Error, about subject: Subject = .none) {
        let code: Int32
        switch subject {
        case .none: code = fs.errnoCode(error, nil)
        case .node(let nodeid): code = fs.errnoCode(error, fs.table.inode(nodeid))
        case .inode(let inode): code = fs.errnoCode(error, inode)
        case .child(let parent, let name):
            code = fs.errnoCode(error, nil, path: fs.table.inode(parent).flatMap { try? fs.childPath($0, name) })
        }
        fuse_reply_err(req, code)
    }

    static func ok(_ req: fuse_req_t?) {
        fuse_reply_err(req, 0)
    }

    static func parameters(_ entry: Entry) -> fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = entry.nodeid
        e.generation = 0
        e.attr = entry.attributes
        e.attr_timeout = entry.attributeTimeout
        e.entry_timeout = entry.entryTimeout
        return e
    }

    /// lookup: a refused reply forgets the lookup again.
    static func entry(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ entry: Entry) {
        var e = parameters(entry)
        if fuse_reply_entry(req, &e) != 0 { fs.abandon(entry) }
    }

    /// mknod, mkdir, symlink, link: a refused reply also removes the object made.
    static func made(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ made: MadeEntry) {
        var e = parameters(made.entry)
        if fuse_reply_entry(req, &e) != 0 { fs.abandon(made) }
    }

    static func attributes(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ st: stat) {
        var st = st
        fuse_reply_attr(req, &st, fs.options.attributeTimeout)
    }

    /// Stores `handle` in `fi` (a retained reference) with the page-cache choice for `flags`.
    /// A read-only handle is closed without the kernel's flush (FOPEN_NOFLUSH): a FLUSH has
    /// nothing to do here (`LowLevelOperations.addFiles`; locks are the kernel's, writes reach
    /// the daemon when they are made), and the kernel's own work at a close, writing back the
    /// inode's dirty shared-map pages, is left to the close of the writable handle that made
    /// them.
    private static func store(_ handle: OpenFile, _ fs: OverlayFilesystem, in fi: UnsafeMutablePointer<fuse_file_info>) {
        fi.pointee.fh = handle.retainedHandle()
        fi.pointee.direct_io = fs.directIO(flags: fi.pointee.flags) ? 1 : 0
        fi.pointee.keep_cache = 0
        fi.pointee.noflush = fi.pointee.flags & O_ACCMODE == O_RDONLY ? 1 : 0
    }

    /// open: a refused reply releases the handle again.
    static func open(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ handle: OpenFile, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        store(handle, fs, in: fi)
        if fuse_reply_open(req, fi) != 0 {
            _ = OpenFile.release(fi.pointee.fh)
            fs.abandon(handle)
        }
    }

    /// create: a refused reply releases the handle, forgets the lookup and removes the file made.
    static func create(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ created: CreatedFile, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        var e = parameters(created.entry)
        store(created.handle, fs, in: fi)
        if fuse_reply_create(req, &e, fi) != 0 {
            _ = OpenFile.release(fi.pointee.fh)
            fs.abandon(created)
        }
    }

    /// opendir: a refused reply releases the directory handle again.
    static func openDirectory(_ req: fuse_req_t?, _ dir: OpenDirectory, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        fi.pointee.fh = dir.retainedHandle()
        fi.pointee.cache_readdir = 0
        if fuse_reply_open(req, fi) != 0 { _ = OpenDirectory.release(fi.pointee.fh) }
    }

    static func bytes(_ req: fuse_req_t?, _ bytes: UnsafeRawBufferPointer) {
        fuse_reply_buf(req, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
    }

    static func xattr(_ req: fuse_req_t?, _ reply: XattrReply) {
        switch reply {
        case .size(let size): fuse_reply_xattr(req, size)
        case .value(let value): value.withUnsafeBytes { bytes(req, $0) }
        }
    }

    /// Packs directory entries from `page` into a reply of at most `size` bytes. An entry
    /// looked up for readdirplus that does not fit is forgotten at once; when the kernel refuses
    /// the reply, every entry it would have received is forgotten (it will never forget them).
    static func directory(_ req: fuse_req_t?, _ fs: OverlayFilesystem, _ page: inout DirectoryPage, size: Int) {
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
        defer { buffer.deallocate() }
        var used = 0
        var counted: [Entry] = []
        while let item = page.next() {
            let needed = item.name.withUnsafeBufferPointer { name in
                add(req, item, page.plus, name.baseAddress, to: buffer + used, room: size - used)
            }
            if needed > size - used {
                if let entry = item.entry { fs.abandon(entry) }
                break
            }
            if let entry = item.entry { counted.append(entry) }
            used += needed
        }
        if fuse_reply_buf(req, buffer, used) != 0 {
            for entry in counted { fs.abandon(entry) }
        }
    }

    /// fuse_add_direntry(_plus) of one item; returns the room it needs (more than `room`: not added).
    private static func add(_ req: fuse_req_t?, _ item: DirectoryPage.Item, _ plus: Bool, _ name: UnsafePointer<CChar>?,
                            to buffer: UnsafeMutablePointer<CChar>, room: Int) -> Int {
        let next = off_t(item.nextOffset)
        if plus {
            var e = fuse_entry_param()
            if let entry = item.entry {
                e = parameters(entry)
            } else {
                e.attr = item.basic
            }
            return fuse_add_direntry_plus(req, buffer, room, name, &e, next)
        }
        var st = item.basic
        return fuse_add_direntry(req, buffer, room, name, &st, next)
    }
}
