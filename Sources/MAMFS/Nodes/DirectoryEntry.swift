import Glibc

/// One entry of a directory listing snapshot.
struct DirectoryEntry: Sendable {
    /// The backing name's bytes with the terminating NUL (names need not be UTF-8).
    let name: [CChar]
    let ino: UInt64
    let type: UInt8

    var isDotOrDotDot: Bool { name == [46, 0] || name == [46, 46, 0] }
}
