import CFuse
import Glibc

/// The requests that make, remove and rename names, and the ones on symlinks and the whole
/// filesystem.
extension LowLevelOperations {
    static func addDirectories(_ ops: inout fuse_lowlevel_ops) {
        ops.mknod = { req, parent, name, mode, rdev in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.made(req, fs, try fs.mknod(parent: parent, name: name, mode: mode, rdev: rdev, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .child(parent, name)) }
            }
        }
        ops.mkdir = { req, parent, name, mode in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.made(req, fs, try fs.mkdir(parent: parent, name: name, mode: mode, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .child(parent, name)) }
            }
        }
        ops.symlink = { req, target, parent, name in
            guard let target, let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.made(req, fs, try fs.symlink(target: target, parent: parent, name: name, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .child(parent, name)) }
            }
        }
        ops.link = { req, ino, newParent, newName in
            guard let newName else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.made(req, fs, try fs.link(ino, newParent: newParent, newName: newName, caller: caller)) }
                catch { Reply.error(req, fs, error) }
            }
        }
        ops.unlink = { req, parent, name in LowLevelOperations.remove(req, parent, name, directory: false) }
        ops.rmdir = { req, parent, name in LowLevelOperations.remove(req, parent, name, directory: true) }
        ops.rename = { req, parent, name, newParent, newName, flags in
            guard let name, let newName else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do {
                    try fs.rename(parent: parent, name: name, newParent: newParent, newName: newName, flags: flags, caller: caller)
                    Reply.ok(req)
                } catch { Reply.error(req, fs, error) }
            }
        }
        ops.readlink = { req, ino in
            serve(req) { fs, caller in
                do { fuse_reply_readlink(req, try fs.readlink(ino, caller: caller) + [0]) }
                catch { Reply.error(req, fs, error) }
            }
        }
        ops.statfs = { req, _ in
            let fs = filesystem(req)
            do {
                var st = try fs.statfs(caller: Caller(req))
                fuse_reply_statfs(req, &st)
            } catch { Reply.error(req, fs, error) }
        }
    }

    static func remove(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>?, directory: Bool) {
        guard let name else { fuse_reply_err(req, EINVAL); return }
        serve(req) { fs, caller in
            do {
                try fs.unlink(parent: parent, name: name, directory: directory, caller: caller)
                Reply.ok(req)
            } catch { Reply.error(req, fs, error) }
        }
    }

    static func addListings(_ ops: inout fuse_lowlevel_ops) {
        ops.opendir = { req, ino, fi in
            guard let fi else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.openDirectory(req, try fs.opendir(ino, caller: caller), fi) }
                catch { Reply.error(req, fs, error) }
            }
        }
        ops.readdir = { req, _, size, offset, fi in LowLevelOperations.list(req, size, offset, fi, plus: false) }
        ops.readdirplus = { req, _, size, offset, fi in LowLevelOperations.list(req, size, offset, fi, plus: true) }
        ops.releasedir = { req, _, fi in
            if let fi { _ = OpenDirectory.release(fi.pointee.fh) }
            fuse_reply_err(req, 0)
        }
        ops.fsyncdir = { req, ino, _, _ in
            serve(req) { fs, caller in
                do { try fs.fsyncdir(ino, caller: caller); Reply.ok(req) }
                catch { Reply.error(req, fs, error) }
            }
        }
    }

    static func list(_ req: fuse_req_t?, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?, plus: Bool) {
        guard let fi, let dir = OpenDirectory.borrow(fi.pointee.fh) else { fuse_reply_err(req, EBADF); return }
        serve(req) { fs, caller in
            do {
                var page = try fs.readdir(dir, offset: Int(offset), plus: plus, caller: caller)
                Reply.directory(req, fs, &page, size: size)
            } catch { Reply.error(req, fs, error) }
        }
    }
}
