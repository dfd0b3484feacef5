import CFuse
import Glibc

/// The fuse_lowlevel_ops table: the FUSE front end of `OverlayFilesystem`. Each callback
/// decodes its request (node ids, the kernel's name bytes, fuse_file_info, the caller), calls
/// one core function and sends the reply (`Reply`). Callbacks are non-capturing closures that
/// recover the filesystem from the session's userdata (no global state). Names and symlink
/// targets are passed on as the kernel's bytes (C strings valid for the request): a name need
/// not be UTF-8, and a Swift String would replace such bytes and name another file.
enum LowLevelOperations {
    /// getlk/setlk/flock are deliberately absent: the kernel then does local POSIX and BSD
    /// locking, which is right for a single-host overlay.
    static func make() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in
            guard let userdata, let conn else { return }
            LowLevelOperations.initialize(Unmanaged<OverlayFilesystem>.fromOpaque(userdata).takeUnretainedValue(), conn)
        }
        addNames(&ops)
        addFiles(&ops)
        addDirectories(&ops)
        addListings(&ops)
        addXattrs(&ops)
        return ops
    }

    /// Requests of up to 1 MiB. libfuse 3.14 has no FUSE_CAP_MAX_PAGES to ask for: it answers
    /// the kernel's FUSE_MAX_PAGES with max_pages = max_write / page size (at most its 1 MiB
    /// buffer), so max_write sets the size of direct-I/O reads too. max_read is left as libfuse
    /// set it (0 = no limit, or the -o max_read mount option, which it must match); a smaller
    /// -o max_write still wins.
    static func initialize(_ fs: OverlayFilesystem, _ conn: UnsafeMutablePointer<fuse_conn_info>) {
        conn.pointee.max_write = 1 << 20
        if let connectionOptions = fs.connectionOptions { fuse_apply_conn_info_opts(connectionOptions, conn) }
        // Writes go through to us (no writeback cache), so O_APPEND and sizes stay ours.
        conn.pointee.want &= ~UInt32(FUSE_CAP_WRITEBACK_CACHE)
        // Since Linux 5.16 ("fuse: always flush dirty data on close(2)") the kernel writes dirty
        // pages back at close before it looks whether FLUSH was refused; FUSE 7.36 is 5.17,
        // clear of that boundary.
        let proto = (conn.pointee.proto_major, conn.pointee.proto_minor)
        fs.closeWritesBackWithoutFlush.store(proto.0 > 7 || (proto.0 == 7 && proto.1 >= 36), ordering: .relaxed)
    }

    private static func addNames(_ ops: inout fuse_lowlevel_ops) {
        ops.lookup = { req, parent, name in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.entry(req, fs, try fs.lookup(parent: parent, name: name, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .child(parent, name)) }
            }
        }
        ops.forget = { req, ino, nlookup in
            filesystem(req).forget(ino, count: nlookup)
            fuse_reply_none(req)
        }
        ops.forget_multi = { req, count, forgets in
            let fs = filesystem(req)
            if let forgets {
                for i in 0..<count { fs.forget(forgets[i].ino, count: forgets[i].nlookup) }
            }
            fuse_reply_none(req)
        }
        ops.getattr = { req, ino, _ in
            serve(req) { fs, caller in
                do { Reply.attributes(req, fs, try fs.getattr(ino, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .node(ino)) }
            }
        }
        ops.setattr = { req, ino, attr, toSet, fi in
            guard let attr else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                let handle = fi.flatMap { OpenFile.borrow($0.pointee.fh) }
                let changes = LowLevelOperations.attributeChanges(attr.pointee, toSet)
                do { Reply.attributes(req, fs, try fs.setattr(ino, changes, handle: handle, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .node(ino)) }
            }
        }
        ops.access = { req, ino, mask in
            serve(req) { fs, caller in
                do { try fs.access(ino, mask: mask, caller: caller); Reply.ok(req) }
                catch { Reply.error(req, fs, error, about: .node(ino)) }
            }
        }
    }

    /// The changes a setattr's `toSet` bits (FUSE_SET_ATTR_*) select from `attr`.
    static func attributeChanges(_ attr: stat, _ toSet: Int32) -> AttributeChanges {
        var changes = AttributeChanges()
        if toSet & FUSE_SET_ATTR_UID != 0 { changes.uid = attr.st_uid }
        if toSet & FUSE_SET_ATTR_GID != 0 { changes.gid = attr.st_gid }
        if toSet & FUSE_SET_ATTR_MODE != 0 { changes.mode = attr.st_mode }
        if toSet & FUSE_SET_ATTR_SIZE != 0 { changes.size = Int64(attr.st_size) }
        func time(_ set: Int32, _ now: Int32, _ value: timespec) -> AttributeChanges.Time {
            if toSet & now != 0 { return .now }
            if toSet & set != 0 { return .set(value) }
            return .omit
        }
        changes.accessTime = time(FUSE_SET_ATTR_ATIME, FUSE_SET_ATTR_ATIME_NOW, attr.st_atim)
        changes.modificationTime = time(FUSE_SET_ATTR_MTIME, FUSE_SET_ATTR_MTIME_NOW, attr.st_mtim)
        return changes
    }
}

/// Runs a request's handler with the node descriptors it reads kept open until it returns
/// (DescriptorCache.withPins). Handlers that use only their open handle's descriptor (read,
/// write, flush, fsync, release, fallocate, lseek) and forget do without.
func serve(_ req: fuse_req_t?, _ handler: (OverlayFilesystem, Caller) -> Void) {
    let fs = filesystem(req)
    let caller = Caller(req)
    DescriptorCache.withPins { handler(fs, caller) }
}

func filesystem(_ req: fuse_req_t?) -> OverlayFilesystem {
    Unmanaged<OverlayFilesystem>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
}
