import Glibc

/// A node the kernel is told about (lookup, create, mknod, mkdir, symlink, link,
/// readdirplus): its entry (whose lookup count went up by one), the attributes with the
/// plaintext size, and how long the kernel may cache each (seconds).
struct Entry {
    let inode: Inode
    let attributes: stat
    let attributeTimeout: Double
    let entryTimeout: Double

    var nodeid: UInt64 { inode.nodeid }
}
