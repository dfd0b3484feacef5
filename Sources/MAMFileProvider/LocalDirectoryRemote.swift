import Foundation
import MAMProtection
import MAMSystem

/// The embedded remote store: a plain directory (`--remote DIR`), e.g. a synced folder or a
/// network mount.
///
/// Identity: an item's identifier is its path relative to the root ("docs/a.txt";
/// `ItemIdentifier.rootContainer` is the root). A rename therefore changes the identifier of
/// the item and of everything below it, as on WebDAV or S3. The providers handle this without
/// knowing it: `move` returns the item at its new identifier, and renames done directly in the
/// directory are recognised because `contentVersion` survives a rename (same inode, size and
/// mtime), and `fileID` is `<st_dev>:<st_ino>:<birth time>`, which a rename keeps (a write
/// through this store replaces the file, so it gets a new one). The birth time tells a new
/// file that got a freed inode number at once (ext4 does) from the old one; on a filesystem
/// that records none the fileID is `<st_dev>:<st_ino>` and such a file is told apart by the
/// providers' content check of a rename (`ContentMatch`) only when its contentVersion differs. Nothing is ever written to the remote to
/// track identity (no xattrs), so a read-only remote works for reading.
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
/// enumeration, which removes one an upload left behind: `AbandonedUploadTemporary`), held
/// with flock(2) while it is written, fsynced, given its mode, then renamed into place (create uses
/// `RENAME_NOREPLACE` so a name taken meanwhile is a conflict, never an overwrite) and the
/// directory fsynced. The base-version check of `modify` and `delete` and the rename are not
/// one atomic step: a writer bypassing this store in that window is not detected.
///
/// A root that is missing, not a directory, or answers ENOTCONN/ESTALE/EIO makes every call
/// throw `.unreachable`.
///
/// Hostile contents: every path below the root is resolved through `ConfinedDirectory`, so no
/// symlink inside the remote is ever followed (enumerating, reading or writing through one
/// fails: the item is not found); symlinks are listed as symlink items, their target read
/// with `readlinkat`. Names are kept as their exact bytes; a name that is not valid UTF-8 is
/// left out of the listing and logged, and so is `.mamfs-provider` at the root (the name of
/// the provider's own metadata directory, `ProviderLayout.metadataDirectoryName`). FIFOs, sockets and devices are not listed, and a file
/// replaced by one is refused on read without blocking.
public struct LocalDirectoryRemote: RemoteStore {
    /// Absolute, standardized root path.
    public let root: String
    /// When true every write throws `.readOnly` (a read-only share).
    public let readOnly: Bool
    /// Receives one line per remote entry that is skipped (a name that is not valid UTF-8, or
    /// `.mamfs-provider` at the root).
    public let log: @Sendable (String) -> Void

    /// - Parameters:
    ///   - root: the remote directory (made absolute and standardized; it need not exist yet,
    ///     calls throw `.unreachable` until it does).
    ///   - readOnly: refuse every write with `.readOnly`.
    ///   - log: where skipped entries are reported (default: standard error).
    public init(root: String, readOnly: Bool = false, log: (@Sendable (String) -> Void)? = nil) {
        self.root = URL(fileURLWithPath: root, isDirectory: true).standardizedFileURL.path
        self.readOnly = readOnly
        self.log = log ?? { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// The root for confined calls.
    /// - Throws: `.unreachable`.
    private func tree() throws -> ConfinedDirectory {
        _ = try rootStat()
        do { return try ConfinedDirectory(path: root) } catch {
            throw RemoteError.unreachable("\(root): \(String(cString: strerror(errno)))")
        }
    }

    /// The identifier as a path relative to the root ("" for the root).
    private func relativePath(_ identifier: ItemIdentifier) throws -> String {
        if identifier == .rootContainer { return "" }
        _ = try path(of: identifier)
        return identifier.rawValue
    }

    public var location: String { root }

    /// `<st_dev>:<st_ino>` of the root directory.
    public func volumeIdentity() throws -> String? {
        let st = try rootStat()
        return "\(st.st_dev):\(st.st_ino)"
    }

    public func enumerate(container: ItemIdentifier) throws -> [RemoteItem] {
        let tree = try tree()
        let directory = try relativePath(container)
        let names = tree.names(in: directory) { escaped in
            log("remote \(root): skipped '\(ConfinedDirectory.child(directory, escaped))': the name is not valid UTF-8")
        }
        guard let names else {
            if errno == ELOOP { throw RemoteError.notFound(container) }
            throw failure(errno, container, "list")
        }
        var items: [RemoteItem] = []
        for name in names {
            if FileSystem.isTemporaryName(name) {
                removeIfAbandoned(ConfinedDirectory.child(directory, name), name: name, tree: tree)
                continue
            }
            if container == .rootContainer && ProviderBinding.isReservedTopName(name) {
                log("remote \(root): skipped '\(name)': the name is reserved for the provider's own files")
                continue
            }
            let relative = container == .rootContainer ? name : container.rawValue + "/" + name
            guard let st = tree.lstat(relative), let item = makeItem(relative: relative, st: st, tree: tree) else { continue }
            items.append(item)
        }
        return items
    }

    /// Removes the temp file `relative` of an upload that ended before its rename
    /// (`AbandonedUploadTemporary`), and says so in the log; nothing on a read-only store.
    private func removeIfAbandoned(_ relative: String, name: String, tree: ConfinedDirectory) {
        guard !readOnly, AbandonedUploadTemporary.hasUploadForm(name),
              AbandonedUploadTemporary.removeIfAbandoned(relative, tree: tree) else { return }
        log("remote \(root): removed '\(relative)', the temp file of an upload that ended before it was renamed into place "
            + "(not written for \(Int(AbandonedUploadTemporary.age / 3600)) hours, no writer holds it)")
    }

    public func item(_ identifier: ItemIdentifier) throws -> RemoteItem {
        let tree = try tree()
        let relative = try relativePath(identifier)
        guard let st = tree.lstat(relative) else {
            if errno == ELOOP { throw RemoteError.notFound(identifier) }
            throw failure(errno, identifier, "stat")
        }
        guard let item = makeItem(relative: identifier.rawValue, st: st, tree: tree) else { throw RemoteError.notFound(identifier) }
        return item
    }

    /// Asks the kernel to read the files ahead (POSIX_FADV_WILLNEED), so a cold disk works on
    /// several at once while they are read one after the other. Each is opened as
    /// `readContents` opens it (no symlink followed, nothing but a regular file); anything that
    /// fails is skipped.
    public func prefetchContents(of identifiers: [ItemIdentifier]) {
        guard let tree = try? tree() else { return }
        for identifier in identifiers {
            guard let relative = try? relativePath(identifier), !relative.isEmpty else { continue }
            let fd = tree.openExisting(relative, O_RDONLY)
            guard fd >= 0 else { continue }
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED)
            close(fd)
        }
    }

    public func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem {
        let tree = try tree()
        let relative = try relativePath(identifier)
        for _ in 0..<3 {
            // Type checked before and after opening, and opened O_NONBLOCK: a FIFO or device
            // put in place of the file is refused without blocking.
            let fd = tree.openExisting(relative, O_RDONLY)
            guard fd >= 0 else {
                if errno == EINVAL || errno == ELOOP { throw RemoteError.failed("'\(identifier)' is not a regular file") }
                throw failure(errno, identifier, "open")
            }
            defer { close(fd) }
            var before = stat()
            guard fstat(fd, &before) == 0 else { throw failure(errno, identifier, "stat") }
            guard FileSystem.isRegular(before) else { throw RemoteError.failed("'\(identifier)' is not a file") }
            // The destination is the caller's own file (possibly an in-memory one named by
            // /proc/self/fd), so it is opened as named.
            let outFile: FileDescriptor
            do {
                outFile = try FileDescriptor.open(destination.path, O_WRONLY | O_CLOEXEC)
            } catch {
                errno = error.rawValue
                throw RemoteError.failed("cannot open \(destination.path): \(String(cString: strerror(errno)))")
            }
            let out = outFile.rawValue
            do {
                try FileSystem.transferBytes(from: fd, to: out)
            } catch MAMError.system(_, let code) {
                throw failure(code, identifier, "read")
            }
            var after = stat()
            guard fstat(fd, &after) == 0 else { throw failure(errno, identifier, "stat") }
            if after.st_size == before.st_size, after.st_mtim.tv_sec == before.st_mtim.tv_sec,
               after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
               let item = makeItem(relative: identifier.rawValue, st: after, tree: tree) {
                return item
            }
        }
        throw RemoteError.conflict(identifier, current: nil)
    }

    public func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem {
        try requireWritable()
        let tree = try tree()
        try validate(name: name)
        let parentRelative = try relativePath(parent)
        guard let parentStat = tree.lstat(parentRelative) else {
            if errno == ELOOP { throw RemoteError.notFound(parent) }
            throw failure(errno, parent, "stat")
        }
        guard FileSystem.isDirectory(parentStat) else { throw RemoteError.notFound(parent) }
        let relative = parent == .rootContainer ? name : parent.rawValue + "/" + name
        let identifier = ItemIdentifier(relative)
        switch contents {
        case .directory:
            guard tree.mkdir(relative, 0o755) == 0 else { throw failure(errno, identifier, "mkdir") }
        case .symlink(let destination):
            guard tree.symlink(destination, relative) == 0 else { throw failure(errno, identifier, "symlink") }
        case .file(let url):
            let temp = try writeTemporary(in: parentRelative, tree: tree, name: name, from: url, mode: 0o644, identifier: identifier)
            guard tree.rename(temp, relative, flags: SystemConstants.renameNoReplace) == 0 else {
                let code = errno
                _ = tree.unlink(temp)
                throw failure(code, identifier, "rename")
            }
        }
        tree.syncDirectory(parentRelative)
        return try item(identifier)
    }

    public func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem {
        try requireWritable()
        let current = try item(identifier)
        guard current.type == .file else { throw RemoteError.failed("'\(identifier)' is not a file") }
        guard current.version.contentVersion == baseVersion else {
            throw RemoteError.conflict(identifier, current: current.version)
        }
        let tree = try tree()
        let target = try relativePath(identifier)
        let directory = PathName.parent(of: target)
        let temp = try writeTemporary(in: directory, tree: tree, name: current.filename, from: contentsURL,
                                      mode: mode_t(current.mode ?? 0o644), identifier: identifier)
        // Narrow the window between the version check and the rename as far as we can.
        let latest = try? item(identifier)
        guard latest?.version.contentVersion == baseVersion else {
            _ = tree.unlink(temp)
            throw RemoteError.conflict(identifier, current: latest?.version)
        }
        guard tree.rename(temp, target) == 0 else {
            let code = errno
            _ = tree.unlink(temp)
            throw failure(code, identifier, "rename")
        }
        tree.syncDirectory(directory)
        return try item(identifier)
    }

    public func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws {
        try requireWritable()
        guard identifier != .rootContainer else { throw RemoteError.failed("the root cannot be deleted") }
        let current = try item(identifier)
        if let baseVersion, current.version.contentVersion != baseVersion {
            throw RemoteError.conflict(identifier, current: current.version)
        }
        let tree = try tree()
        let relative = try relativePath(identifier)
        let rc = current.type == .directory ? tree.rmdir(relative) : tree.unlink(relative)
        guard rc == 0 else { throw failure(errno, identifier, "delete") }
        tree.syncDirectory(PathName.parent(of: relative))
    }

    public func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem {
        try requireWritable()
        guard identifier != .rootContainer else { throw RemoteError.failed("the root cannot be moved") }
        try validate(name: newName)
        _ = try item(identifier)
        let tree = try tree()
        let source = try relativePath(identifier)
        let parentRelative = try relativePath(newParent)
        guard let parentStat = tree.lstat(parentRelative), FileSystem.isDirectory(parentStat) else {
            throw RemoteError.notFound(newParent)
        }
        let relative = newParent == .rootContainer ? newName : newParent.rawValue + "/" + newName
        guard tree.rename(source, relative, flags: SystemConstants.renameNoReplace) == 0 else {
            throw failure(errno, ItemIdentifier(relative), "move")
        }
        tree.syncDirectory(parentRelative)
        tree.syncDirectory(PathName.parent(of: source))
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

    private func makeItem(relative: String, st: stat, tree: ConfinedDirectory) -> RemoteItem? {
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
            target = tree.readLink(relative)
        }
        let name = FileSystem.lastComponent(relative)
        let parentPath = PathName.parent(of: relative)
        let parent = parentPath.isEmpty ? ItemIdentifier.rootContainer : ItemIdentifier(parentPath)
        let mode = UInt32(st.st_mode & 0o7777)
        let metadata = "m:" + FileSystem.fnv1a("\(name)\u{0}\(parent.rawValue)\u{0}\(mode)\u{0}\(mtime)")
        return RemoteItem(identifier: ItemIdentifier(relative), parentIdentifier: parent, filename: name, type: type,
                          size: size, version: ItemVersion(contentVersion: contentVersion, metadataVersion: metadata),
                          mode: mode, symlinkTarget: target,
                          fileID: tree.birthTime(relative).map { "\(st.st_dev):\(st.st_ino):\($0)" } ?? "\(st.st_dev):\(st.st_ino)")
    }

    /// Copies `url` into a fsynced temp file `.NAME.mamfs-tmp-XXXXXX` in `directory` (relative
    /// to the root, made without following symlinks) with `mode`; returns its relative path.
    private func writeTemporary(in directory: String, tree: ConfinedDirectory, name: String, from url: URL, mode: mode_t,
                                identifier: ItemIdentifier) throws -> String {
        let sourceFile: FileDescriptor
        do {
            sourceFile = try FileDescriptor.open(url.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        } catch {
            errno = error.rawValue
            throw RemoteError.failed("cannot open \(url.path): \(String(cString: strerror(errno)))")
        }
        let source = sourceFile.rawValue
        var st = stat()
        guard fstat(source, &st) == 0, FileSystem.isRegular(st) else {
            throw RemoteError.failed("\(url.path) is not a regular file")
        }
        let base = name.isEmpty ? "item" : String(decoding: name.utf8.prefix(80), as: UTF8.self)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        var fd: Int32 = -1
        var temp = ""
        for _ in 0..<100 {
            let suffix = String((0..<6).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
            temp = ConfinedDirectory.child(directory, ".\(base).mamfs-tmp-\(suffix)")
            fd = tree.open(temp, O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw failure(errno, identifier, "create temp file") }
        defer { close(fd) }
        // Held while the bytes are copied: a listing never takes a temp whose writer stalls
        // for longer than `AbandonedUploadTemporary.age` for an abandoned one. A new file has a
        // fresh mtime, which keeps it too, so a filesystem without flock (ENOLCK) only loses
        // the stall case.
        _ = flock(fd, LOCK_EX | LOCK_NB)
        do {
            try FileSystem.copyBytes(from: source, to: fd)
            guard fchmod(fd, mode & 0o7777) == 0, fsync(fd) == 0 else { throw MAMError.fromErrno("fsync") }
        } catch MAMError.system(_, let code) {
            _ = tree.unlink(temp)
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
        case ENOSPC, EDQUOT: return .insufficientStorage(identifier)
        default: return .failed("\(what) '\(identifier)': \(String(cString: strerror(code)))")
        }
    }
}
