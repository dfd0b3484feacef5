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
/// - it is a regular file of this user with one link;
/// - it was not written for `age` seconds (its mtime);
/// - no writer holds it: the store's writer keeps an flock(2) on its temp while it copies, so
///   an upload that stalls longer than `age` keeps its temp;
/// - it is still the file at that name when it is removed.
enum AbandonedUploadTemporary {
    /// Seconds without a write after which an unlocked temp counts as abandoned.
    static let age: Double = 600

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
        let fd = tree.open(relative, O_RDONLY | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_uid == geteuid(), st.st_nlink == 1 else {
            return false
        }
        let written = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        guard now - written >= age, flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
        // The name may have been given to another file between the open and the lock.
        guard let named = tree.lstat(relative), named.st_dev == st.st_dev, named.st_ino == st.st_ino else { return false }
        return tree.unlink(relative) == 0
    }
}
