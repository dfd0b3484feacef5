/// An object a request made (mknod, mkdir, symlink, link): its entry, and what removes it
/// again when the kernel does not take the reply (see `OverlayFilesystem.abandon(_:)`).
struct MadeEntry {
    let entry: Entry
    let made: MadeObject?
    let directory: Inode
    /// The name made in `directory` (the kernel's bytes with the terminating NUL).
    let name: [CChar]
}
