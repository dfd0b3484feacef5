import Foundation
import MAMSystem

extension OverlayFilesystem {
    /// Clears the set-user-ID and set-group-ID bits that a content change (write, truncate,
    /// fallocate, open with O_TRUNC) by `caller` must clear on the regular file open as `fd`
    /// (a handle's descriptor or an inode's O_PATH descriptor), as the kernel decides for a
    /// local filesystem (`setattr_should_drop_suidgid`): for a caller other than root
    /// (CAP_FSETID), S_ISUID always, and S_ISGID when the file has group execute or the caller
    /// is not in the file's group. The kernel's FUSE module clears S_ISUID, and S_ISGID only
    /// with group execute, by a setattr before it sends the request; the rest (a set-group-ID
    /// file without group execute, changed by someone outside its group) is the daemon's.
    /// The kernel's cached attributes of `nodeid` are invalidated when a bit went, as the
    /// replies of write, fallocate and open carry none. `statted`: the file's fstat, taken by
    /// the caller just before (a write's), or nil.
    /// - Throws: the errno of fstat or chmod (EIO, EROFS, ...); nothing when no bit must go.
    func clearSetIDBits(fd: Int32, statted: stat? = nil, nodeid: UInt64, for caller: Caller) throws {
        guard caller.uid != 0 else { return }
        let st = try statted ?? SystemCall.stat(fd: fd)
        guard st.st_mode & S_IFMT == S_IFREG, st.st_mode & (S_ISUID | S_ISGID) != 0 else { return }
        var kill: mode_t = st.st_mode & S_ISUID
        if st.st_mode & S_ISGID != 0,
           st.st_mode & S_IXGRP != 0 || !caller.credentials.isMember(of: st.st_gid) {
            kill |= S_ISGID
        }
        guard kill != 0 else { return }
        guard chmod(ProcessDescriptorPath.path(of: fd), st.st_mode & 0o7777 & ~kill) == 0 else { throw FilesystemError.current() }
        attributesChanged?(nodeid)
    }
}
