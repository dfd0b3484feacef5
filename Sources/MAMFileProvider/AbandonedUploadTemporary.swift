import Foundation
import Glibc

/// The temp file an upload to a `LocalDirectoryRemote` leaves behind when it ends before the
/// temp is renamed into place (the process killed, the machine off): `.NAME.mamfs-tmp-XXXXXX`
/// in the target directory. Enumeration skips such names; this removes the abandoned ones, so
/// a killed upload does not leave its bytes (a copy of the uploaded file) on the remote for
/// good.
///
/// A temp counts as abandoned only when all of these hold:
/// - it has the exact form the store writes (six letters or digits after `.mamfs-tmp-`);
/// - it is a regular file of this user with one link (checked before it is opened, so no
///   device or FIFO of that name is ever opened, and again on the descriptor);
/// - it was not written for `age` seconds (its mtime): a day, so that a writer on another
///   machine sharing the directory (a network mount or a synced folder, where a lock does not
///   reach, and whose clock may differ by minutes) is never taken for gone;
/// - no writer holds it: the store's writer keeps an exclusive flock(2) on its temp while it
///   copies, and the check asks for a shared one (which an NFS client grants on a read-only
///   descriptor);
/// - it is still the file at that name when it is removed.
enum AbandonedUploadTemporary {
    /// Seconds without a write after which an unlocked temp counts as abandoned (one day).
    static let age: Double = 86_400

    /// Whether `name` has the form of the store's temp files: `.BASE.mamfs-tmp-XXXXXX`, with a
    /// non-empty BASE and six ASCII letters or digits.
    static func hasUploadForm(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        let marker = Array(".mamfs-tmp-".utf8)
        guard bytes.count >= 1 + 1 + marker.count + 6, bytes[0] == UInt8(ascii: ".") else { return false }
        let suffix = bytes.suffix(6)
        let markerStart = bytes.count - 6 - marker.count
        return Array(bytes[markerStart..<(bytes.count - 6)]) == marker && markerStart >= 2
            && suffix.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    /// Removes the temp `relative` (below `tree`) when it is abandoned (see the type).
    /// - Parameter now: seconds since the epoch (the current time unless a test gives one).
    /// - Returns: true when it was removed; false when it is kept, or cannot be looked at.
    static func removeIfAbandoned(_ relative: String, tree: ConfinedDirectory,
                                  now: Double = Date().timeIntervalSince1970) -> Bool {
        guard let listed = tree.lstat(relative), isCandidate(listed, now: now) else { return false }
        let fd = tree.open(relative, O_RDONLY | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_dev == listed.st_dev, st.st_ino == listed.st_ino, isCandidate(st, now: now),
              flock(fd, LOCK_SH | LOCK_NB) == 0 else { return false }
        // The name may have been given to another file between the open and the lock.
        guard let named = tree.lstat(relative), named.st_dev == st.st_dev, named.st_ino == st.st_ino else { return false }
        return tree.unlink(relative) == 0
    }

    /// A regular file of this user with one link, not written for `age` seconds.
    private static func isCandidate(_ st: stat, now: Double) -> Bool {
        let written = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        return (st.st_mode & S_IFMT) == S_IFREG && st.st_uid == geteuid() && st.st_nlink == 1 && now - written >= age
    }
}
