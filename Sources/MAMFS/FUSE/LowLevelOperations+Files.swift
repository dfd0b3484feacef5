import CFuse
import Glibc

/// The requests on regular files and their open handles.
extension LowLevelOperations {
    static func addFiles(_ ops: inout fuse_lowlevel_ops) {
        ops.create = { req, parent, name, mode, fi in
            guard let name, let fi else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.create(req, fs, try fs.create(parent: parent, name: name, mode: mode, flags: fi.pointee.flags, caller: caller), fi) }
                catch { Reply.error(req, fs, error) }
            }
        }
        ops.open = { req, ino, fi in
            guard let fi else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.open(req, fs, try fs.open(ino, flags: fi.pointee.flags, caller: caller), fi) }
                catch { Reply.error(req, fs, error, about: .node(ino)) }
            }
        }
        ops.read = { req, _, size, offset, fi in
            LowLevelOperations.withHandle(req, fi) { fs, handle in
                try fs.read(handle, size: size, offset: Int(offset), caller: Caller(req)) { Reply.bytes(req, $0) }
            }
        }
        ops.write = { req, _, buf, size, offset, fi in
            LowLevelOperations.withHandle(req, fi) { fs, handle in
                let data = UnsafeRawBufferPointer(start: buf, count: size)
                let written = try fs.write(handle, data, offset: Int(offset), writepage: fi?.pointee.writepage != 0, caller: Caller(req))
                fuse_reply_write(req, written)
            }
        }
        // Nothing is buffered here (data reaches the backing file at write) and locks are the
        // kernel's, so a FLUSH has nothing to do. Where the kernel's own work at close (writing
        // the inode's dirty shared-map pages back and reporting their errors) does not depend on
        // it, the first FLUSH is refused with ENOSYS, after which the kernel sends none on this
        // connection (`no_flush`): a close costs no round trip.
        ops.flush = { req, _, _ in
            fuse_reply_err(req, filesystem(req).closeWritesBackWithoutFlush.load(ordering: .relaxed) ? ENOSYS : 0)
        }
        ops.fsync = { req, _, datasync, fi in
            LowLevelOperations.withHandle(req, fi, logged: false) { fs, handle in
                try fs.fsync(handle, datasync: datasync != 0, caller: Caller(req))
                Reply.ok(req)
            }
        }
        ops.release = { req, _, fi in
            if let fi, let handle = OpenFile.release(fi.pointee.fh) { filesystem(req).release(handle, caller: Caller(req)) }
            fuse_reply_err(req, 0)
        }
        ops.fallocate = { req, _, mode, offset, length, fi in
            LowLevelOperations.withHandle(req, fi) { fs, handle in
                try fs.fallocate(handle, mode: mode, offset: Int(offset), length: Int(length), caller: Caller(req))
                Reply.ok(req)
            }
        }
        ops.lseek = { req, _, offset, whence, fi in
            LowLevelOperations.withHandle(req, fi) { fs, handle in
                fuse_reply_lseek(req, off_t(try fs.lseek(handle, offset: Int(offset), whence: whence, caller: Caller(req))))
            }
        }
    }

    /// Runs `body` with the open handle of `fi` (EBADF without one); its error is the reply
    /// (`logged`: with the file's backing path for an authentication failure).
    static func withHandle(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>?, logged: Bool = true,
                                   _ body: (OverlayFilesystem, OpenFile) throws -> Void) {
        guard let fi, let handle = OpenFile.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        let fs = filesystem(req)
        do { try body(fs, handle) } catch { Reply.error(req, fs, error, about: logged ? .inode(handle.inode) : .none) }
    }
}
