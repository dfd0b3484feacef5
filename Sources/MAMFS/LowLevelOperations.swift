import CFuse
import Glibc

/// The fuse_lowlevel_ops table. Callbacks are non-capturing closures that recover the
/// filesystem from the session's userdata (no global state). Names and symlink targets are
/// passed on as the kernel's bytes (C strings valid for the request): a name need not be
/// UTF-8, and a Swift String would replace such bytes and name another file.
enum LowLevelOperations {
    /// getlk/setlk/flock are deliberately absent: the kernel then does local POSIX and BSD
    /// locking, which is right for a single-host overlay.
    static func make() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in
            guard let userdata, let conn else { return }
            Unmanaged<OverlayFilesystem>.fromOpaque(userdata).takeUnretainedValue().initialize(conn)
        }
        ops.lookup = { req, parent, name in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.lookup(req, parent, name) }
        }
        ops.forget = { req, ino, nlookup in
            filesystem(req).forget(ino, nlookup)
            fuse_reply_none(req)
        }
        ops.forget_multi = { req, count, forgets in
            let fs = filesystem(req)
            if let forgets {
                for i in 0..<count { fs.forget(forgets[i].ino, forgets[i].nlookup) }
            }
            fuse_reply_none(req)
        }
        ops.getattr = { req, ino, _ in serve(req) { $0.getattr(req, ino) } }
        ops.setattr = { req, ino, attr, toSet, fi in
            guard let attr else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.setattr(req, ino, attr.pointee, toSet, fi) }
        }
        ops.readlink = { req, ino in serve(req) { $0.readlink(req, ino) } }
        ops.mknod = { req, parent, name, mode, rdev in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.mknod(req, parent, name, mode, rdev) }
        }
        ops.mkdir = { req, parent, name, mode in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.mkdir(req, parent, name, mode) }
        }
        ops.unlink = { req, parent, name in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.unlink(req, parent, name, directory: false) }
        }
        ops.rmdir = { req, parent, name in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.unlink(req, parent, name, directory: true) }
        }
        ops.symlink = { req, target, parent, name in
            guard let target, let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.symlink(req, target, parent, name) }
        }
        ops.rename = { req, parent, name, newParent, newName, flags in
            guard let name, let newName else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs in fs.namespaceLock.reading { fs.rename(req, parent, name, newParent, newName, flags) } }
        }
        ops.link = { req, ino, newParent, newName in
            guard let newName else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs in fs.namespaceLock.reading { fs.link(req, ino, newParent, newName) } }
        }
        ops.open = { req, ino, fi in
            guard let fi else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.open(req, ino, fi) }
        }
        ops.read = { req, _, size, offset, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            filesystem(req).read(req, size, Int(offset), fi)
        }
        ops.write = { req, _, buf, size, offset, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            filesystem(req).write(req, buf, size, Int(offset), fi)
        }
        ops.access = { req, ino, mask in serve(req) { $0.access(req, ino, mask) } }
        ops.flush = { req, _, _ in filesystem(req).flush(req) }
        ops.release = { req, _, fi in
            guard let fi else { fuse_reply_err(req, 0); return }
            filesystem(req).release(req, fi)
        }
        ops.fsync = { req, _, datasync, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            filesystem(req).fsync(req, datasync != 0, fi)
        }
        ops.opendir = { req, ino, fi in
            guard let fi else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.opendir(req, ino, fi) }
        }
        ops.readdir = { req, ino, size, offset, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            serve(req) { $0.readdir(req, ino, size, Int(offset), fi, plus: false) }
        }
        ops.readdirplus = { req, ino, size, offset, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            serve(req) { $0.readdir(req, ino, size, Int(offset), fi, plus: true) }
        }
        ops.releasedir = { req, _, fi in
            guard let fi else { fuse_reply_err(req, 0); return }
            filesystem(req).releasedir(req, fi)
        }
        ops.fsyncdir = { req, ino, _, _ in serve(req) { $0.fsyncdir(req, ino) } }
        ops.statfs = { req, _ in filesystem(req).statfs(req) }
        ops.setxattr = { req, ino, name, value, size, flags in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.setxattr(req, ino, name, value, size, flags) }
        }
        ops.getxattr = { req, ino, name, size in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.getxattr(req, ino, name, size) }
        }
        ops.listxattr = { req, ino, size in serve(req) { $0.listxattr(req, ino, size) } }
        ops.removexattr = { req, ino, name in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.removexattr(req, ino, name) }
        }
        ops.create = { req, parent, name, mode, fi in
            guard let name, let fi else { fuse_reply_err(req, EINVAL); return }
            serve(req) { $0.create(req, parent, name, mode, fi) }
        }
        ops.fallocate = { req, _, mode, offset, length, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            filesystem(req).fallocate(req, mode, Int(offset), Int(length), fi)
        }
        ops.lseek = { req, _, offset, whence, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            filesystem(req).lseek(req, Int(offset), whence, fi)
        }
        return ops
    }
}

/// Runs a request's handler with the node descriptors it reads kept open until it returns
/// (DescriptorCache.withPins). Handlers that use only their open handle's descriptor (read,
/// write, flush, fsync, release, fallocate, lseek) and forget do without.
private func serve(_ req: fuse_req_t?, _ handler: (OverlayFilesystem) -> Void) {
    let fs = filesystem(req)
    DescriptorCache.withPins { handler(fs) }
}

private func filesystem(_ req: fuse_req_t?) -> OverlayFilesystem {
    Unmanaged<OverlayFilesystem>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
}
