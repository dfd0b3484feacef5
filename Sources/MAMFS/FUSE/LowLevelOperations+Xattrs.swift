import CFuse
import Glibc

/// The extended-attribute requests.
extension LowLevelOperations {
    static func addXattrs(_ ops: inout fuse_lowlevel_ops) {
        ops.setxattr = { req, ino, name, value, size, flags in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do {
                    try fs.setxattr(ino, name: name, value: UnsafeRawBufferPointer(start: value, count: size), flags: flags, caller: caller)
                    Reply.ok(req)
                } catch { Reply.error(req, fs, error, about: .node(ino)) }
            }
        }
        ops.getxattr = { req, ino, name, size in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { Reply.xattr(req, try fs.getxattr(ino, name: name, size: size, caller: caller)) }
                catch { Reply.error(req, fs, error, about: .node(ino)) }
            }
        }
        ops.listxattr = { req, ino, size in
            serve(req) { fs, caller in
                do { Reply.xattr(req, try fs.listxattr(ino, size: size, caller: caller)) }
                catch { Reply.error(req, fs, error) }
            }
        }
        ops.removexattr = { req, ino, name in
            guard let name else { fuse_reply_err(req, EINVAL); return }
            serve(req) { fs, caller in
                do { try fs.removexattr(ino, name: name, caller: caller); Reply.ok(req) }
                catch { Reply.error(req, fs, error) }
            }
        }
    }
}
