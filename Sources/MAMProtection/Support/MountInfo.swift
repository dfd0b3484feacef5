import Foundation

/// The mount table of this process's mount namespace, as the kernel writes it in
/// `/proc/self/mountinfo` (proc(5)): one line per mount,
/// `ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`.
///
/// The kernel writes space, tab, newline and backslash in ROOT, MOUNTPOINT and SOURCE as `\ooo`
/// octal escapes; `entries` holds them unescaped, byte for byte (a path that is not UTF-8 is
/// decoded with replacement characters, as every other path mamfs reads from the kernel).
public struct MountInfo: Sendable, Equatable {
    /// One line of the table.
    public struct Entry: Sendable, Equatable {
        /// The mount's root inside its filesystem ("/" unless it is a bind mount of a subtree).
        public let root: String
        /// Where it is mounted, absolute.
        public let mountPoint: String
        /// The filesystem type: "ext4", "fuse", "fuse.mamfs" (`fuse.SUBTYPE`), ...
        public let filesystemType: String
        /// The mount source ("/dev/sda1", "tmpfs", a FUSE mount's `fsname`); "" when the line has none.
        public let source: String
        /// The filesystem's device number as `MAJOR:MINOR` ("0:42"; the st_dev of its files).
        /// For a FUSE mount the minor number is the connection's number (the directory name in
        /// /sys/fs/fuse/connections, `fuse_connection` in the fdinfo of the daemon's /dev/fuse).
        public let device: String
        /// The per-mount options ("rw,nosuid,nodev,relatime"); "" when the line has none.
        public let options: String
        /// The filesystem's own options after the source ("rw,user_id=0,group_id=0,allow_other").
        public let superOptions: String

        public init(root: String, mountPoint: String, filesystemType: String, source: String, device: String = "",
                    options: String = "", superOptions: String = "") {
            self.root = root
            self.mountPoint = mountPoint
            self.filesystemType = filesystemType
            self.source = source
            self.device = device
            self.options = options
            self.superOptions = superOptions
        }

        /// True for any FUSE filesystem (`fuse`, `fuseblk`, `fuse.SUBTYPE`).
        public var isFuse: Bool { filesystemType.hasPrefix("fuse") }

        /// The minor number of `device`; nil when the field is not `MAJOR:MINOR`.
        public var minorDevice: UInt32? {
            let parts = device.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, UInt32(parts[0]) != nil else { return nil }
            return UInt32(parts[1])
        }
    }

    /// The mounts in table order (a parent before what is mounted inside it).
    public let entries: [Entry]

    /// Where the kernel publishes the table of the calling process's namespace.
    public static let procPath = "/proc/self/mountinfo"

    /// Parses mountinfo text. Lines with fewer than five fields are skipped; a line without
    /// the `-` separator (or with nothing after it) keeps its mount point with an empty type
    /// and source, so a mount point is never lost to a line the parser does not understand.
    public init(parsing text: String) {
        var entries: [Entry] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 4 else { continue }
            var type = ""
            var source = ""
            var superOptions = ""
            if let dash = fields.dropFirst(6).firstIndex(of: "-") {
                if dash + 1 < fields.count { type = String(fields[dash + 1]) }
                if dash + 2 < fields.count { source = Self.unescape(fields[dash + 2]) }
                if dash + 3 < fields.count { superOptions = String(fields[dash + 3]) }
            }
            entries.append(Entry(root: Self.unescape(fields[3]), mountPoint: Self.unescape(fields[4]),
                                 filesystemType: type, source: source, device: String(fields[2]),
                                 options: fields.count > 5 ? String(fields[5]) : "", superOptions: superOptions))
        }
        self.entries = entries
    }

    public init(entries: [Entry]) {
        self.entries = entries
    }

    /// The table of this namespace; nil when /proc is not mounted (or not readable).
    public static func current() -> MountInfo? {
        guard let text = try? String(contentsOfFile: procPath, encoding: .utf8) else { return nil }
        return MountInfo(parsing: text)
    }

    /// Undoes the kernel's `\ooo` escapes (three octal digits, value at most 0o377); a
    /// backslash not followed by such digits is kept as it is.
    public static func unescape<S: StringProtocol>(_ field: S) -> String {
        var bytes: [UInt8] = []
        let raw = Array(field.utf8)
        bytes.reserveCapacity(raw.count)
        var index = 0
        while index < raw.count {
            if raw[index] == UInt8(ascii: "\\"), index + 3 < raw.count,
               let value = octal(raw[(index + 1)...(index + 3)]) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(raw[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value: UInt32 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "7") else { return nil }
            value = value * 8 + UInt32(digit - UInt8(ascii: "0"))
        }
        return value <= 0xFF ? UInt8(value) : nil
    }
}
