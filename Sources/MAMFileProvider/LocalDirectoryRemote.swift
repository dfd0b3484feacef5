import CSystem
import Foundation
import MAMProtection

/// The embedded remote store: a plain directory (`--remote DIR`), e.g. a synced folder or a
/// network mount.
///
/// Identity: an item's identifier is its path relative to the root ("docs/a.txt";
/// `ItemIdentifier.rootContainer` is the root). A rename therefore changes the identifier of
/// the item and of everything below it, as on WebDAV or S3. The providers handle this without
/// knowing it: `move` returns the item at its new identifier, and renames done directly in the
/// directory are recognised because `contentVersion` survives a rename (same inode, size and
/// mtime). Nothing is ever written to the remote to track identity (no xattrs), so a
/// read-only remote works for reading.
///
/// Versions:
/// - `contentVersion` of a file is `f:<inode>:<size>:<mtime_ns>`. Writes through this store
///   replace the file with a new inode (temp + rename), so they always change it; an edit made
///   in place by another program changes mtime and usually size. Not detected: an in-place
///   rewrite of the same size within one mtime tick of the filesystem.
///   Directories are `d:<inode>`, symlinks `l:<inode>:<mtime_ns>`.
/// - `metadataVersion` is an FNV-1a hash of (name, parent, mode, mtime_ns).
///
/// Writes go to a 0600 temp file in the target directory (`.NAME.mamfs-tmp-XXXXXX`, skipped by
/// enumeration), fsynced, given its mode, then renamed into place (create uses
/// `RENAME_NOREPLACE` so a name taken meanwhile is a conflict, never an overwrite) and the
/// directory fsynced. The base-version check of `modify` and `delete` and the rename are not
/// one atomic step: a writer bypassing this store in that window is not detected.
///
/// A root that is missing, not a directory, or answers ENOTCONN/ESTALE/EIO makes every call
/// throw `.unreachable`.
public struct LocalDirectoryRemote: RemoteStore {
    /// Absolute, standardized root path.
    public let root: String
    /// When true every write throws `.readOnly` (a read-only share).
    public let readOnly: Bool

    /// - Parameters:
    ///   - root: the remote directory (made absolute and standardized; it need not exist yet,
    ///     calls throw `.unreachable` until it does).
    ///   - readOnly: refuse every write with `.readOnly`.
    public init(root: String, readOnly: Bool = false) {
        self.root = URL(fileURLWithPath: root, isDirectory: true).standardizedFileURL.path
        self.readOnly = readOnly
    }

    public var location: String { root }

    /// `<st_dev>:<st_ino>` of the root directory.
    public func volumeIdentity() throws -> String? {
        let st = try rootStat()
        return "\(st.st_dev):\(st.st_ino)"
    }

    public func enumerate(container: ItemIdentifier) throws -> [RemoteItem] {
        _ = try rootStat()
        let directory = try path(of: container)
        guard let dir = opendir(directory) else {
            throw failure(errno, container, "list")
        }
        defer { closedir(dir) }
        var items: [RemoteItem] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." || FileSystem.isTemporaryName(name) { continue }
            let relative = container == .rootContainer ? name : container.rawValue + "/" + name
            guard let st = FileSystem.lstatPath(directory + "/" + name),
                  let item = makeItem(relative: relative, st: st) else { continue }
            items.append(item)
        }
        return items
    }

    public func item(_ identifier: ItemIdentifier) throws -> RemoteItem {
        _ = try rootStat()
        let p = try path(of: identifier)
        guard let st = FileSystem.lstatPath(p) else { throw failure(errno, identifier, "stat") }
        guard let item = makeItem(relative: identifier.rawValue, st: st) else { throw RemoteError.notFound(identifier) }
        return item
    }

    public func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem {
        _ = try rootStat()
        let p = try path(of: identifier)
        for _ in 0..<3 {
            let fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { throw failure(errno, identifier, "open") }
            defer { close(fd) }
            var before = stat()
            guard fstat(fd, &before) == 0 else { throw failure(errno, identifier, "stat") }
            guard FileSystem.isRegular(before) else { throw RemoteError.failed("'\(identifier)' is not a file") }
            let out = open(destination.path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            guard out >= 0 else { throw RemoteError.failed("cannot open \(destination.path): \(String(cString: strerror(errno)))") }
            defer { close(out) }
            do {
                try FileSystem.copyBytes(from: fd, to: out)
            } catch MAMError.system(_, let code) {
                throw failure(code, identifier, "read")
            }
            var after = stat()
            guard fstat(fd, &after) == 0 else { throw failure(errno, identifier, "stat") }
            if after.st_size == before.st_size, after.st_mtim.tv_sec == before.st_mtim.tv_sec,
               after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
               let item = makeItem(relative: identifier.rawValue, st: after) {
                return item
            }
        }
        throw RemoteError.conflict(identifier, current: nil)
    }

    public func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem {
        try requireWritable()
        _ = try rootStat()
        try validate(name: name)
        let parentPath = try path(of: parent)
        guard let parentStat = FileSystem.lstatPath(parentPath) else { throw failure(errno, parent, "stat") }
        guard FileSystem.isDirectory(parentStat) else { throw RemoteError.notFound(parent) }
        let relative = parent == .rootContainer ? name : parent.rawValue + "/" + name
        let identifier = ItemIdentifier(relative)
        let target = parentPath + "/" + name
        switch contents {
        case .directory:
            guard mkdir(target, 0o755) == 0 else { throw failure(errno, identifier, "mkdir") }
        case .symlink(let destination):
            guard symlink(destination, target) == 0 else { throw failure(errno, identifier, "symlink") }
        case .file(let url):
            let temp = try writeTemporary(in: parentPath, name: name, from: url, mode: 0o644, identifier: identifier)
            guard mamfs_renameat2(AT_FDCWD, temp, AT_FDCWD, target, mamfs_RENAME_NOREPLACE) == 0 else {
                let code = errno
                unlink(temp)
                throw failure(code, identifier, "rename")
            }
        }
        FileSystem.syncDirectory(parentPath)
        return try item(identifier)
    }

    public func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem {
        try requireWritable()
        let current = try item(identifier)
        guard current.type == .file else { throw RemoteError.failed("'\(identifier)' is not a file") }
        guard current.version.contentVersion == baseVersion else {
            throw RemoteError.conflict(identifier, current: current.version)
        }
        let target = try path(of: identifier)
        let directory = PathName.directory(of: target)
        let temp = try writeTemporary(in: directory, name: current.filename, from: contentsURL,
                                      mode: mode_t(current.mode ?? 0o644), identifier: identifier)
        // Narrow the window between the version check and the rename as far as we can.
        let latest = try? item(identifier)
        guard latest?.version.contentVersion == baseVersion else {
            unlink(temp)
            throw RemoteError.conflict(identifier, current: latest?.version)
        }
        guard rename(temp, target) == 0 else {
            let code = errno
            unlink(temp)
            throw failure(code, identifier, "rename")
        }
        FileSystem.syncDirectory(directory)
        return try item(identifier)
    }

    public func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws {
        try requireWritable()
        guard identifier != .rootContainer else { throw RemoteError.failed("the root cannot be deleted") }
        let current = try item(identifier)
        if let baseVersion, current.version.contentVersion != baseVersion {
            throw RemoteError.conflict(identifier, current: current.version)
        }
        let p = try path(of: identifier)
        let rc = current.type == .directory ? rmdir(p) : unlink(p)
        guard rc == 0 else { throw failure(errno, identifier, "delete") }
        FileSystem.syncDirectory(PathName.directory(of: p))
    }

    public func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem {
        try requireWritable()
        guard identifier != .rootContainer else { throw RemoteError.failed("the root cannot be moved") }
        try validate(name: newName)
        _ = try item(identifier)
        let source = try path(of: identifier)
        let parentPath = try path(of: newParent)
        guard let parentStat = FileSystem.lstatPath(parentPath), FileSystem.isDirectory(parentStat) else {
            throw RemoteError.notFound(newParent)
        }
        let relative = newParent == .rootContainer ? newName : newParent.rawValue + "/" + newName
        let target = parentPath + "/" + newName
        guard mamfs_renameat2(AT_FDCWD, source, AT_FDCWD, target, mamfs_RENAME_NOREPLACE) == 0 else {
            throw failure(errno, ItemIdentifier(relative), "move")
        }
        FileSystem.syncDirectory(parentPath)
        FileSystem.syncDirectory(PathName.directory(of: source))
        return try item(ItemIdentifier(relative))
    }

    // MARK: Helpers

    private func rootStat() throws -> stat {
        guard let st = FileSystem.lstatPath(root) else {
            throw RemoteError.unreachable("\(root): \(String(cString: strerror(errno)))")
        }
        guard FileSystem.isDirectory(st) else { throw RemoteError.unreachable("\(root) is not a directory") }
        return st
    }

    private func requireWritable() throws {
        if readOnly { throw RemoteError.readOnly(root) }
    }

    /// The absolute path of an identifier; identifiers that would leave the root are unknown.
    private func path(of identifier: ItemIdentifier) throws -> String {
        if identifier == .rootContainer { return root }
        let parts = identifier.rawValue.split(separator: "/", omittingEmptySubsequences: false)
        guard !parts.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            throw RemoteError.notFound(identifier)
        }
        return root + "/" + identifier.rawValue
    }

    private func validate(name: String) throws {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.contains("\0"),
              !FileSystem.isTemporaryName(name), name.utf8.count <= 255 else {
            throw RemoteError.failed("'\(name)' is not a valid name")
        }
    }

    private func makeItem(relative: String, st: stat) -> RemoteItem? {
        guard let type = FileSystem.itemType(st) else { return nil }
        let mtime = FileSystem.mtimeNanoseconds(st)
        let contentVersion: String
        var target: String?
        var size = Int64(st.st_size)
        switch type {
        case .file: contentVersion = "f:\(st.st_ino):\(st.st_size):\(mtime)"
        case .directory: contentVersion = "d:\(st.st_ino)"; size = 0
        case .symlink:
            contentVersion = "l:\(st.st_ino):\(mtime)"
            target = FileSystem.readLink(root + "/" + relative)
        }
        let name = FileSystem.lastComponent(relative)
        let parentPath = FileSystem.parentPath(relative)
        let parent = parentPath.isEmpty ? ItemIdentifier.rootContainer : ItemIdentifier(parentPath)
        let mode = UInt32(st.st_mode & 0o7777)
        let metadata = "m:" + FileSystem.fnv1a("\(name)\u{0}\(parent.rawValue)\u{0}\(mode)\u{0}\(mtime)")
        return RemoteItem(identifier: ItemIdentifier(relative), parentIdentifier: parent, filename: name, type: type,
                          size: size, version: ItemVersion(contentVersion: contentVersion, metadataVersion: metadata),
                          mode: mode, symlinkTarget: target)
    }

    /// Copies `url` into a fsynced temp file in `directory` with `mode`; returns its path.
    private func writeTemporary(in directory: String, name: String, from url: URL, mode: mode_t,
                                identifier: ItemIdentifier) throws -> String {
        let source = open(url.path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw RemoteError.failed("cannot open \(url.path): \(String(cString: strerror(errno)))") }
        defer { close(source) }
        guard let (fd, temp) = FileSystem.makeTemporaryFile(in: directory, name: name) else {
            throw failure(errno, identifier, "create temp file")
        }
        defer { close(fd) }
        do {
            try FileSystem.copyBytes(from: source, to: fd)
            guard fchmod(fd, mode & 0o7777) == 0, fsync(fd) == 0 else { throw MAMError.fromErrno("fsync") }
        } catch MAMError.system(_, let code) {
            unlink(temp)
            throw failure(code, identifier, "write")
        }
        return temp
    }

    /// Maps an errno to the store's error, checking first whether the whole root went away.
    private func failure(_ code: Int32, _ identifier: ItemIdentifier, _ what: String) -> RemoteError {
        if (try? rootStat()) == nil {
            return .unreachable("\(root): \(String(cString: strerror(ENOENT)))")
        }
        switch code {
        case ENOENT, ENOTDIR: return .notFound(identifier)
        case EROFS, EACCES, EPERM: return .readOnly("\(what) '\(identifier)': \(String(cString: strerror(code)))")
        case ENOTCONN, ESTALE, ENODEV, EHOSTDOWN, EHOSTUNREACH, ENETUNREACH:
            return .unreachable("\(root): \(String(cString: strerror(code)))")
        case EEXIST, ENOTEMPTY: return .conflict(identifier, current: (try? item(identifier))?.version)
        default: return .failed("\(what) '\(identifier)': \(String(cString: strerror(code)))")
        }
    }
}
