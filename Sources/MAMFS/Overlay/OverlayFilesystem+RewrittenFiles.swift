import Glibc
import MAMProtection

/// Backing files rewritten behind the mount (another program writing the backing directory)
/// while handles are open on them.
///
/// While a handle is open the entry's cached header is trusted between requests, since the
/// mount's own writes move the ctime. Every open reads the header again; each read, write,
/// truncation and fallocate through a handle compares the backing file's ctime (from the fstat
/// the request makes anyway) with the one the mount last saw: a move the mount did not make
/// itself has the header read again. A header other than the cached one (or none that reads)
/// makes every handle opened before stale: its requests fail with EIO, so a handle never
/// reads or writes the new file through the header of the old one (ciphertext shown as data,
/// a header written over another program's bytes) nor follows it to another owner (a managed
/// app's writes landing in a file that is no longer encrypted). New opens read the file as it
/// is. After each change of its own the mount reads the ctime again (`sawOwnChange`), so what
/// goes unnoticed is a rewrite in the moment between the change and that fstat.
extension OverlayFilesystem {
    /// Checks a request through `handle` that has just read the backing file's `ctime`;
    /// `changing`: the request goes on to change the file's content (and then calls
    /// `sawOwnChange` when it is done). Returns false for a handle left on a file its entry no
    /// longer names (it reads its own header; nothing is checked).
    /// - Throws: EIO when the file was rewritten behind the mount after the handle was opened.
    @discardableResult
    func requireNotRewrittenBehind(_ handle: OpenFile, ctime: timespec, changing: Bool) throws -> Bool {
        let inode = handle.inode
        guard let seen = inode.observe(ctime: ctime, changing: changing, file: handle.backingKey) else { return false }
        var rewrites = seen.rewrites
        if seen.move == .behindMount {
            noticeRewrite(inode, fd: handle.fd, ctime: ctime)
            rewrites = inode.rewrites
        }
        guard rewrites == handle.rewritesAtOpen else {
            log("node \(inode.nodeid): its backing file was rewritten behind the mount while open; EIO for the handles opened before",
                limitedBy: "rewritten \(inode.nodeid)")
            throw FilesystemError(code: EIO)
        }
        return true
    }

    /// After the mount changed the content of `inode`'s file, open as `fd`: the ctime now is
    /// the mount's own (an fstat, so a rewrite behind the mount right after the change is told
    /// from it; when the fstat fails the next move counts as the mount's).
    func sawOwnChange(_ inode: Inode, fd: Int32) {
        var st = stat()
        inode.sawOwnChange(ctime: fstat(fd, &st) == 0 ? st.st_ctim : nil)
    }

    /// After mamfs itself rewrote `inode`'s file (an owner change, the encryption before a
    /// write) or moved the entry to the file it wrote: the header is read now, as the mount's
    /// own, so that the handles that follow it are checked against it from here on (a rewrite
    /// behind the mount before their next request makes them stale rather than followed).
    /// When it cannot be read the entry is left without one, read at the next request.
    func readHeaderAfterOwnRewrite(_ inode: Inode) {
        inode.invalidateCachedHeader()
        guard let file = try? reopenBacking(inode, O_RDONLY | O_NONBLOCK | O_CLOEXEC, noAccessTime: true),
              let st = try? file.stat(), let header = try? ProtectedFileHeader.read(fd: file.rawValue) else { return }
        recordHeader(header, of: inode, fd: file.rawValue, stamp: st.st_ctim)
        inode.sawHeader(at: st.st_ctim, rewritten: false)
    }

    /// Reads the header of `inode`'s file, open as `fd` at `ctime`, again after its ctime moved
    /// behind the mount: another header than the cached one is kept and counted as a rewrite;
    /// one that does not read drops the cached one (a new open fails on it as it should).
    func noticeRewrite(_ inode: Inode, fd: Int32, ctime: timespec) {
        guard case .known(let cached, _, _, _) = inode.contentState else { return }
        do {
            let header = try ProtectedFileHeader.read(fd: fd)
            guard header != cached else { return }
            inode.noteRewrite()
            recordHeader(header, of: inode, fd: fd, stamp: ctime)
        } catch {
            inode.noteRewrite()
            inode.invalidateCachedHeader()
        }
    }
}
