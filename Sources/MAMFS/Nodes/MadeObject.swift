import Glibc

/// An object a create, mknod, mkdir, symlink or link request made in a backing directory: what
/// the request removes again when it fails after making it, so a retry does not meet EEXIST.
///
/// Removal goes through the same directory descriptor the object was made with, and only while
/// `name` still names the object made (its st_dev, st_ino): whatever another process put under
/// the name since stays.
struct MadeObject {
    let directoryFD: Int32
    let name: [CChar]
    let key: BackingKey
    let isDirectory: Bool

    /// The object now at `name` in `directoryFD` (just made by the caller); nil when it cannot
    /// be stat'ed (then it is not ours to remove).
    init?(directoryFD: Int32, name: UnsafePointer<CChar>) {
        var st = stat()
        guard fstatat(directoryFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        self.init(directoryFD: directoryFD, name: name, stat: st)
    }

    /// The object with attributes `st` (from fstat of the descriptor it was made with).
    init(directoryFD: Int32, name: UnsafePointer<CChar>, stat st: stat) {
        self.directoryFD = directoryFD
        self.name = Array(UnsafeBufferPointer(start: name, count: strlen(name) + 1))
        self.key = BackingKey(st)
        isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// Unlinks (rmdir for a directory) `name` when it still names the object made.
    func remove() {
        name.withUnsafeBufferPointer { buffer in
            guard let name = buffer.baseAddress else { return }
            var st = stat()
            guard fstatat(directoryFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0, BackingKey(st) == key else { return }
            _ = unlinkat(directoryFD, name, isDirectory ? AT_REMOVEDIR : 0)
        }
    }
}
