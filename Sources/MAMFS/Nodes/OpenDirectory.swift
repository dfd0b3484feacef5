import Synchronization

/// An open directory: a snapshot of its entries, taken at opendir and again whenever a
/// listing restarts at offset 0 (rewinddir), so entry offsets stay stable within one pass.
final class OpenDirectory: KernelHandle, @unchecked Sendable {
    let inode: Inode

    /// The listing and how far readdirplus prefetched headers in it.
    struct Snapshot {
        var entries: [DirectoryEntry] = []
        /// Entries before this index had their headers prefetched (readdirplus).
        var prefetchedUpTo = 0
    }
    let snapshot = Mutex(Snapshot())

    init(inode: Inode) { self.inode = inode }
}
