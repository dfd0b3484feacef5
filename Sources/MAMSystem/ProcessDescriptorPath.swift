import Glibc

/// The /proc/self/fd/N path of an open descriptor: the one place it is spelled. Opening it
/// reopens the file the descriptor refers to (also for O_PATH descriptors); reading it as a
/// link gives the path the kernel has for that file.
public enum ProcessDescriptorPath {
    /// The suffix the kernel adds to the link target of a file whose name was removed.
    public static let deletedSuffix = " (deleted)"

    /// The directory that lists this process's open descriptors.
    public static let directory = "/proc/self/fd"

    /// "/proc/self/fd/`fd`". Several requests ask for it: `String(fd)` and one join, not an
    /// interpolation (its generic formatting cost more than the rest of the call).
    public static func path(of fd: Int32) -> String { directoryWithSlash + String(fd) }

    private static let directoryWithSlash = directory + "/"

    /// The descriptors open in this process now, in the kernel's order, without the one the
    /// listing itself uses.
    /// - Returns: nil when /proc is not mounted or cannot be listed.
    public static func openDescriptors() -> [Int32]? {
        guard let listing = try? FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) else { return nil }
        let own = listing.rawValue
        guard var iterator = try? DirectoryIterator(adopting: listing) else { return nil }
        var descriptors: [Int32] = []
        while let entry = try? iterator.next() {
            if let fd = Int32(entry.text), fd != own { descriptors.append(fd) }
        }
        return descriptors
    }

    /// The path the kernel has for the file open as `fd`, with the " (deleted)" suffix taken
    /// off once and reported in `deleted` (the name was removed: the path is where it was).
    /// A live file whose own name ends in " (deleted)" reads the same; callers for which
    /// that matters check the path again (stat and compare device and inode).
    /// - Throws: ENOENT when /proc is not mounted or `fd` is not open; other readlink errors.
    public static func currentPath(of fd: Int32) throws(Errno) -> (path: String, deleted: Bool) {
        currentPath(readLinkTarget: try SymbolicLink.readLinkString(path(of: fd)))
    }

    /// `currentPath` of a /proc/self/fd link's `target` as readlink gave it.
    public static func currentPath(readLinkTarget target: String) -> (path: String, deleted: Bool) {
        guard target.hasSuffix(deletedSuffix) else { return (target, false) }
        return (String(target.dropLast(deletedSuffix.count)), true)
    }
}
