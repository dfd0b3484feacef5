import Glibc

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
        let copy = dup(fd)
        guard copy >= 0 else { return [] }
        guard let stream = fdopendir(copy) else { close(copy); return [] }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [EntryName] = []
        while let entry = readdir(stream) {
            let bytes = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { pointer in
                    Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer) + 1))
                }
            }
            let name = EntryName(bytes: bytes)
            if name.text != "." && name.text != ".." { names.append(name) }
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
                let child = openat(fd, entry.bytes, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { continue }
                removed += removeContents(of: child)
                close(child)
                if unlinkat(fd, entry.bytes, AT_REMOVEDIR) == 0 { removed += 1 }
            } else if unlinkat(fd, entry.bytes, 0) == 0 {
                removed += 1
            }
        }
        return removed
    }
}
