import Glibc

/// One entry readdir gave: the name's exact bytes (names need not be UTF-8) and its d_type.
public struct DirectoryEntry: Sendable, Equatable {
    /// The name's bytes, without a terminating NUL.
    public let name: [UInt8]
    /// d_type: DT_REG, DT_DIR, DT_LNK, ... or DT_UNKNOWN when the filesystem does not say.
    public let type: UInt8
    /// d_ino.
    public let inode: UInt64

    public init(name: [UInt8], type: UInt8, inode: UInt64) {
        self.name = name
        self.type = type
        self.inode = inode
    }

    /// The name NUL-terminated, for the *at calls.
    public var cName: [CChar] { name.map { CChar(bitPattern: $0) } + [0] }

    /// The name decoded as UTF-8 (invalid bytes replaced), for messages.
    public var text: String { String(decoding: name, as: UTF8.self) }

    /// "." or "..".
    public var isDotOrDotDot: Bool { name == [0x2E] || name == [0x2E, 0x2E] }
}
