import Glibc

/// One readdir reply's worth of a listing, produced one entry at a time so the front end stops
/// at the first entry that does not fit in the kernel's buffer (readdirplus looks each entry
/// up, lookup count + 1, only when it is asked for).
struct DirectoryPage {
    /// One listed entry: its name (with the terminating NUL), the offset of the entry after it,
    /// and either the looked-up entry (readdirplus) or just the inode number and type bits.
    struct Item {
        let name: [CChar]
        let nextOffset: Int
        /// readdirplus: the entry whose lookup count went up for this item (nil for "." and
        /// "..", and for an entry that could not be looked up: listed without attributes).
        let entry: Entry?
        /// st_ino and the S_IFMT bits of st_mode (readdir, or readdirplus without an entry).
        let basic: stat
    }

    let fs: OverlayFilesystem
    let directory: Inode
    let entries: [DirectoryEntry]
    private var index: Int
    let plus: Bool

    init(fs: OverlayFilesystem, directory: Inode, entries: [DirectoryEntry], start: Int, plus: Bool) {
        self.fs = fs
        self.directory = directory
        self.entries = entries
        self.index = start
        self.plus = plus
    }

    /// The next entry, nil at the end. Hidden entries (a wiped owner's files: their lookup says
    /// ENOENT) are left out; an entry that cannot be looked up (a damaged header) is listed
    /// without attributes (nodeid 0), so its stat reports the error instead.
    mutating func next() -> Item? {
        while index < entries.count {
            let listed = entries[index]
            index += 1
            var basic = stat()
            basic.st_ino = ino_t(listed.ino)
            basic.st_mode = mode_t(listed.type) << 12
            guard plus, !listed.isDotOrDotDot else { return Item(name: listed.name, nextOffset: index, entry: nil, basic: basic) }
            do {
                // Each entry's descriptor is released once looked up (not held for the reply).
                let (inode, st) = try DescriptorCache.withPins { try fs.lookupEntry(parent: directory, name: listed.name) }
                return Item(name: listed.name, nextOffset: index, entry: fs.entry(inode, st), basic: basic)
            } catch {
                let directory = self.directory
                if fs.errnoCode(error, nil, path: try? fs.childPath(directory, listed.name)) == ENOENT { continue }
                return Item(name: listed.name, nextOffset: index, entry: nil, basic: basic)
            }
        }
        return nil
    }
}
