import Glibc
import MAMSystem

/// A directory entry's name as the bytes the kernel gave (NUL-terminated), so names that are
/// not valid UTF-8 are still examined, and as text for messages.
public struct EntryName: CustomStringConvertible, Sendable {
    /// The name's bytes with the terminating NUL, for the *at calls.
    public let bytes: [CChar]
    /// The name decoded as UTF-8 (invalid bytes replaced), for paths in messages only.
    public var text: String { String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    public var description: String { text }
}

/// Descriptor-relative directory listing and removal: nothing here resolves a path or follows
/// a symlink, so a directory swapped for a symlink meanwhile is never entered.
public enum DirectoryEntries {
    /// The names in the directory open as `fd` (without "." and ".."); `fd` stays open and
    /// its position is not used (the listing reads a duplicate from the start).
    public static func names(of fd: Int32) -> [EntryName] {
        guard var iterator = try? DirectoryIterator(duplicating: fd) else { return [] }
        var names: [EntryName] = []
        while let entry = try? iterator.next() {
            names.append(EntryName(bytes: entry.cName))
        }
        return names
    }

    /// Removes everything inside the directory open as `fd`, depth first, with unlinkat on the
    /// directory that holds each entry; subdirectories on another device (mount points) are
    /// left alone. Returns how many entries were removed. Errors on single entries are skipped.
    @discardableResult
    public static func removeContents(of fd: Int32) -> Int {
        var device = stat()
        guard fstat(fd, &device) == 0 else { return 0 }
        var removed = 0
        for entry in names(of: fd) {
            var st = stat()
            guard fstatat(fd, entry.bytes, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                guard st.st_dev == device.st_dev else { continue }
                guard let child = try? FileDescriptor.open(in: fd, entry.bytes, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else { continue }
                removed += removeContents(of: child.rawValue)
                if unlinkat(fd, entry.bytes, AT_REMOVEDIR) == 0 { removed += 1 }
            } else if unlinkat(fd, entry.bytes, 0) == 0 {
                removed += 1
            }
        }
        return removed
    }
}
