import Glibc
import MAMProtection

/// The mamfs mounts of this process's mount namespace, and the contract between the mount
/// daemon and the tools that find a mount again.
///
/// `MountDaemon` names every mount with FUSE options `fsname=BACKING,subtype=mamfs`: the kernel
/// lists it in /proc/self/mountinfo with filesystem type `fuse.mamfs` and source = the backing
/// directory (absolute, resolved). `fsnameOption(backingDirectory:)` writes that option and
/// `backingDirectory(source:)` reads it back; nothing else spells the format.
///
/// Paths given to the lookups are compared with the kernel's mount points as strings, so they
/// must be absolute with symbolic links resolved (`resolvedPath(_:)` makes them so).
public struct MountTable: Sendable, Equatable {
    /// One mamfs mount.
    public struct Mount: Sendable, Equatable {
        /// Where the plaintext view is mounted (absolute, as the kernel has it).
        public let mountPoint: String
        /// The backing directory it shows (absolute, resolved when it was mounted).
        public let backingDirectory: String

        public init(mountPoint: String, backingDirectory: String) {
            self.mountPoint = mountPoint
            self.backingDirectory = backingDirectory
        }
    }

    /// The FUSE subtype of every mamfs mount (`-o subtype=mamfs`).
    public static let subtype = "mamfs"
    /// The filesystem type the kernel lists for a mamfs mount.
    public static let filesystemType = "fuse." + subtype

    /// Every mamfs mount, in table order (a mount before anything mounted over or inside it).
    public let mounts: [Mount]
    /// Every entry of the table, mamfs or not (for `isFuseMount`).
    private let entries: [MountInfo.Entry]

    /// The mamfs mounts of `info`: entries of type `fuse.mamfs` whose source is an absolute path.
    public init(_ info: MountInfo) {
        entries = info.entries
        mounts = info.entries.compactMap { entry in
            guard entry.filesystemType == Self.filesystemType,
                  let backing = Self.backingDirectory(source: entry.source) else { return nil }
            return Mount(mountPoint: entry.mountPoint, backingDirectory: backing)
        }
    }

    /// The table of this namespace; nil when /proc/self/mountinfo cannot be read.
    public static func current() -> MountTable? {
        MountInfo.current().map(MountTable.init)
    }

    // MARK: The fsname contract

    /// The `fsname=` FUSE option naming a mount of `backingDirectory` (absolute, resolved).
    /// libfuse's option parser reads `,` as the end of an option and a backslash as escaping
    /// the next character, so both are written with a backslash in front; the kernel then gets
    /// the directory exactly, as the mount source.
    public static func fsnameOption(backingDirectory: String) -> String {
        var escaped = ""
        for character in backingDirectory {
            if character == "," || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        return "fsname=" + escaped
    }

    /// The `subtype=` FUSE option of every mamfs mount.
    public static let subtypeOption = "subtype=" + subtype

    /// The backing directory a mamfs mount's source names (the source as `MountInfo`
    /// unescaped it), nil when it is not an absolute path (not a mount `MountDaemon` made).
    public static func backingDirectory(source: String) -> String? {
        source.hasPrefix("/") ? source : nil
    }

    // MARK: Lookups

    /// The mamfs mount at `mountPoint` (absolute, resolved); when several are stacked there,
    /// the one on top, which is the one a path sees.
    public func mount(at mountPoint: String) -> Mount? {
        mounts.last { Self.same($0.mountPoint, mountPoint) }
    }

    /// True when the mount on top at `mountPoint` (absolute, resolved) is a FUSE filesystem of
    /// any kind (`fuse`, `fuseblk`, `fuse.SUBTYPE`).
    public func isFuseMount(_ mountPoint: String) -> Bool {
        entries.last { Self.same($0.mountPoint, mountPoint) }?.isFuse ?? false
    }

    /// The innermost mamfs mount holding `path` (absolute, resolved): the one with the longest
    /// mount point that is `path` or a parent of it; among stacked mounts, the one on top.
    public func mount(containing path: String) -> Mount? {
        var best: Mount?
        for mount in mounts where Self.path(path, isInside: mount.mountPoint) {
            if best.map({ mount.mountPoint.utf8.count >= $0.mountPoint.utf8.count }) ?? true { best = mount }
        }
        return best
    }

    /// `path` (absolute, resolved) as the same file in the backing directory of the innermost
    /// mamfs mount holding it; nil when it lies outside every mamfs mount.
    public func backingPath(of path: String) -> String? {
        guard let mount = mount(containing: path) else { return nil }
        let rest = path.utf8.dropFirst(mount.mountPoint.utf8.count)
        let tail = String(decoding: rest, as: UTF8.self)
        if Self.same(mount.mountPoint, "/") && !tail.isEmpty { return mount.backingDirectory + "/" + tail }
        return mount.backingDirectory + tail
    }

    /// `path` made absolute (against the current directory) with `.`/`..` removed and the
    /// symbolic links of its directory resolved, then mapped into the backing directory of the
    /// innermost mamfs mount holding it; outside every mamfs mount, just resolved.
    public func resolvedBackingPath(_ path: String) -> String {
        let absolute = Self.resolvedPath(path)
        return backingPath(of: absolute) ?? absolute
    }

    /// Byte comparisons: the kernel compares bytes, and `String`'s `==` would take a composed
    /// and a decomposed "é" for the same directory.
    static func path(_ path: String, isInside mountPoint: String) -> Bool {
        same(path, mountPoint) || path.utf8.starts(with: (mountPoint == "/" ? "/" : mountPoint + "/").utf8)
    }

    static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8)
    }

    // MARK: Paths

    /// `path` made absolute (against the current directory), `.` and `..` removed, and the
    /// symbolic links of its directory part resolved; the last component is not followed
    /// (a symbolic link is meant as itself) unless it is a directory. A path whose directory
    /// does not exist comes back absolute and normalised only.
    public static func resolvedPath(_ path: String) -> String {
        var absolute = path
        if !path.hasPrefix("/") {
            absolute = PathName.appending(path, to: currentDirectory())
        }
        absolute = PathName.normalized(absolute)
        if let whole = realPath(absolute), isDirectoryNotLink(absolute) { return whole }
        let parent = PathName.directory(of: absolute)
        let name = PathName.lastComponent(of: absolute)
        guard let resolvedParent = realPath(parent) else { return absolute }
        return resolvedParent == "/" ? "/" + name : resolvedParent + "/" + name
    }

    /// `path` as the kernel lists a mount point: made absolute, `.` and `..` removed, the
    /// symbolic links of its parent directories resolved; the last component itself is never
    /// looked at (on a dead FUSE mount that fails, on a hung one it blocks).
    public static func mountPointPath(_ path: String) -> String {
        var absolute = path
        if !path.hasPrefix("/") {
            absolute = PathName.appending(path, to: currentDirectory())
        }
        absolute = PathName.normalized(absolute)
        guard absolute != "/" else { return absolute }
        let name = PathName.lastComponent(of: absolute)
        guard let resolvedParent = realPath(PathName.directory(of: absolute)) else { return absolute }
        return resolvedParent == "/" ? "/" + name : resolvedParent + "/" + name
    }

    private static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "/" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func isDirectoryNotLink(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }
}
