import Foundation
import MAMSystem

/// A wipe root opened for walking: the descriptor of its parent directory and its name there.
struct WipeRoot {
    /// Directory descriptor of the root's parent (closed by `close()`).
    let parent: Int32
    /// The root's name in `parent` ("." for "/").
    let name: String
    /// The root's path, for messages and progress.
    let path: String
    /// Whether a tag on a directory above the root passes its owner to the root (a tree the
    /// user named or protected); not for a mount's backing directory or a provider root, whose
    /// files never inherit from outside it.
    var inheritsAbove = true

    func close() { _ = Glibc.close(parent) }

    /// The owner the root's parent passes down: the tag of the nearest tagged directory among
    /// the parent and its ancestors, walked up with ".." by descriptors; nil when none is tagged
    /// or `inheritsAbove` is false.
    func ownerAbove() -> String? {
        guard inheritsAbove, var current = try? FileDescriptor.open(in: parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) else { return nil }
        while true {
            if let owner = DirectoryOwner.read(fd: current.rawValue) { return owner }
            guard let here = try? current.stat(),
                  let up = try? FileDescriptor.open(in: current.rawValue, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
                  let above = try? up.stat(), above.st_ino != here.st_ino || above.st_dev != here.st_dev else { return nil }
            current = up
        }
    }

    /// A root given by the caller (`--root`): its parent directories are resolved once, here,
    /// as the caller named them; the root itself must not be a symbolic link.
    /// - Throws: `.fileNotFound`; `.invalidArguments` for a symbolic link; `.system`.
    static func given(_ path: String) throws -> WipeRoot {
        let path = PathName.normalized(path)
        let isSlash = path == "/"
        let parentPath = isSlash ? "/" : PathName.directory(of: path)
        let parent: FileDescriptor
        do {
            parent = try FileDescriptor.open(parentPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        } catch {
            if error == .noSuchFile || error == .notDirectory { throw MAMError.fileNotFound(path) }
            throw MAMError.system(path, errno: error.rawValue)
        }
        let name = isSlash ? "." : PathName.lastComponent(of: path)
        var st = stat()
        guard fstatat(parent.rawValue, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
            let code = errno
            if code == ENOENT { throw MAMError.fileNotFound(path) }
            throw MAMError.system(path, errno: code)
        }
        if (st.st_mode & S_IFMT) == S_IFLNK {
            throw MAMError.invalidArguments("\(path) is a symbolic link; a wipe does not follow symbolic links (give the directory it points to)")
        }
        return WipeRoot(parent: parent.take(), name: name, path: path)
    }

    /// A root the state remembers: every component is opened with O_NOFOLLOW from "/", so a
    /// directory that was swapped for a symbolic link since the root was recorded is not
    /// followed.
    /// - Parameter kind: what the state recorded the root as (`inheritsAbove` for protected paths only).
    /// - Returns: nil when the root is gone (silently) or a component is a symbolic link or
    ///   not a directory (with a line in `notes`).
    static func known(_ path: String, kind: KnownRoot.Kind, notes: inout [String]) -> WipeRoot? {
        let path = PathName.normalized(path)
        guard path.hasPrefix("/") else { return nil }
        let components = path.split(separator: "/").map(String.init)
        var fd: FileDescriptor
        do {
            fd = try FileDescriptor.open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        } catch {
            return nil
        }
        let inheritsAbove = kind == .protected
        guard let last = components.last else { return WipeRoot(parent: fd.take(), name: ".", path: "/", inheritsAbove: inheritsAbove) }
        for component in components.dropLast() {
            do {
                fd = try FileDescriptor.open(in: fd.rawValue, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            } catch {
                if error == .tooManySymbolicLinks || error == .notDirectory {
                    notes.append("\(path): skipped, a directory on its path is now a symbolic link or not a directory (wipe it with --root if it is meant)")
                }
                return nil
            }
        }
        var st = stat()
        guard fstatat(fd.rawValue, last, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        if (st.st_mode & S_IFMT) == S_IFLNK {
            notes.append("\(path): skipped, it is now a symbolic link")
            return nil
        }
        return WipeRoot(parent: fd.take(), name: last, path: path, inheritsAbove: inheritsAbove)
    }
}

/// Walks wipe roots with directory descriptors and removes the files and the emptied
/// directories of one owner.
///
/// A directory is the owner's when it is tagged with the owner, or untagged below a directory
/// tagged with it (nearest tag wins, as for new files); after its contents were walked it is
/// removed if it is empty then (rmdir, which refuses a directory with anything left in it). A
/// directory of the owner that keeps something (another owner's file, an untagged one, a
/// symbolic link, a mount point) stays and loses its own tag. Directories tagged for another
/// owner or for nobody (""), directories with no tagged ancestor, and the roots themselves are
/// never removed.
///
/// Every step is relative to a directory descriptor already held: entries are examined with
/// fstatat(AT_SYMLINK_NOFOLLOW), opened with openat(O_NOFOLLOW | O_NONBLOCK) and checked with
/// fstat, and removed with unlinkat on the same descriptor. Swapping a directory for a
/// symbolic link while the wipe runs therefore cannot send it outside the tree, and a FIFO or
/// device never blocks it. A mount point inside a root is not entered (another st_dev, or a
/// path listed in /proc/self/mountinfo, which also catches bind mounts of the same
/// filesystem); the walk notes it. The contents of every `.mamfs-provider/tmp` directory met are removed
/// whoever owns them: they are provider temporaries that a crash may have left. So is a
/// rewrite's temp file whose writer is gone beside a file of the owner
/// (`removeLeftOverTemporaries`).
struct WipeWalker {
    let owner: String
    let progress: ((WipeProgress) -> Void)?
    /// Told the path of each file and directory removed.
    let removed: ((String) -> Void)?
    var report = WipeReport()
    var examined = 0
    /// Mount points of this mount namespace: a bind mount of the same filesystem has the same
    /// st_dev, so the walk also compares each directory's kernel path with these.
    private let mountPoints = MountPoints.current()

    init(owner: String, progress: ((WipeProgress) -> Void)?, removed: ((String) -> Void)? = nil) {
        self.owner = owner
        self.progress = progress
        self.removed = removed
    }

    /// Wipes below (or, for a file, at) `root`.
    /// - Throws: `.system` when a file of the owner cannot be removed.
    mutating func wipe(_ root: WipeRoot) throws {
        var st = stat()
        guard fstatat(root.parent, root.name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        report.roots.append(root.path)
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            guard let descriptor = openDirectory(in: root.parent, root.name, path: root.path) else { return }
            let fd = descriptor.rawValue
            var opened = stat()
            guard fstat(fd, &opened) == 0, opened.st_ino == st.st_ino, opened.st_dev == st.st_dev else { return }
            let tag = DirectoryOwner.read(fd: fd)
            try walk(fd, path: root.path, kernelPath: MountPoints.kernelPath(of: fd),
                     name: PathName.lastComponent(of: root.path), device: opened.st_dev, depth: 0, owner: tag ?? root.ownerAbove())
            if tag == owner { try? ExtendedAttributes(descriptor: fd).remove(DirectoryOwner.attributeName) }
        case S_IFREG:
            examined += 1
            try wipeFile(in: root.parent, name: Array(root.name.utf8CString), path: root.path, expected: st)
        default:
            return
        }
    }

    /// `owner` is the owner of `directory` (its tag, else its nearest tagged ancestor's; nil for
    /// none); `depth` its levels below the root. What lies deeper than `TreeDepth.maximum` is
    /// not examined (and noted).
    private mutating func walk(_ directory: Int32, path: String, kernelPath: String?, name directoryName: String,
                               device: dev_t, depth: Int, owner directoryOwner: String?) throws {
        guard depth < TreeDepth.maximum else {
            notExamined(path, because: "more than \(TreeDepth.maximum) directory levels below the root")
            return
        }
        let entries = DirectoryEntries.names(of: directory)
        removeLeftOverTemporaries(in: directory, path: path, entries: entries)
        for entry in entries {
            let name = entry.bytes
            let child = PathName.appending(entry.text, to: path)
            let childKernelPath = kernelPath.map { PathName.appending(entry.text, to: $0) }
            var st = stat()
            guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                guard st.st_dev == device, !mountPoints.contains(childKernelPath) else {
                    report.notes.append("\(child): not crossed, it is a mount point (another filesystem); its files were not examined")
                    continue
                }
                guard let descriptor = openDirectory(in: directory, name, path: child) else { continue }
                let fd = descriptor.rawValue
                var opened = stat()
                guard fstat(fd, &opened) == 0, opened.st_ino == st.st_ino, opened.st_dev == device else { continue }
                if entry.text == "tmp" && directoryName == ".mamfs-provider" {
                    purge(fd, path: child, kernelPath: childKernelPath, device: device)
                    continue
                }
                let tag = DirectoryOwner.read(fd: fd)
                let childOwner = tag ?? directoryOwner
                try walk(fd, path: child, kernelPath: childKernelPath, name: entry.text, device: device, depth: depth + 1, owner: childOwner)
                guard childOwner == owner else { continue }
                if removeDirectory(name, in: directory, expected: opened) {
                    report.removedDirectories += 1
                    removed?(child)
                } else if tag == owner {
                    try? ExtendedAttributes(descriptor: fd).remove(DirectoryOwner.attributeName)
                }
            case S_IFREG:
                examined += 1
                try wipeFile(in: directory, name: name, path: child, expected: st)
                if examined % 200 == 0 { progress?(WipeProgress(examined: examined, removed: report.removedFiles)) }
            default:
                continue
            }
        }
    }

    /// Removes `name` in `directory` when it is a regular file of the owner.
    private mutating func wipeFile(in directory: Int32, name: [CChar], path: String, expected: stat) throws {
        var opened = stat()
        let header: ProtectedFileHeader?
        do {
            let fd = try FileDescriptor.open(in: directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
            let same = fstat(fd.rawValue, &opened) == 0 && (opened.st_mode & S_IFMT) == S_IFREG
                && opened.st_ino == expected.st_ino && opened.st_dev == expected.st_dev
            guard same else { return }
            do {
                header = try ProtectedFileHeader.read(fd: fd.rawValue)
            } catch {
                notExamined(path, because: "its header cannot be read (\(error))")
                return
            }
        } catch {
            // Gone, or replaced by a symbolic link, since it was listed: nothing of the owner's.
            if error.rawValue != ENOENT && error.rawValue != ELOOP { notExamined(path, because: error.description) }
            return
        }
        guard let header, header.owner == owner else { return }
        EnrollmentManager.beforeRemovingFile?(PathName.lastComponent(of: path))
        // The name may have been replaced since it was read; only the file examined goes.
        var now = stat()
        guard fstatat(directory, name, &now, AT_SYMLINK_NOFOLLOW) == 0,
              now.st_ino == opened.st_ino, now.st_dev == opened.st_dev else { return }
        guard unlinkat(directory, name, 0) == 0 else { throw MAMError.fromErrno("remove \(path)") }
        report.removedFiles += 1
        removed?(path)
    }

    /// Opens the directory `name` in `directory` for the walk, noting in the report why it could
    /// not be opened (a directory the wipe's user may not read): its files stay unexamined, and
    /// the user is told so rather than left to believe the tree is clean. A directory gone or
    /// replaced by a symbolic link since it was listed is skipped without a note.
    private mutating func openDirectory(in directory: Int32, _ name: UnsafePointer<CChar>, path: String) -> FileDescriptor? {
        do {
            return try FileDescriptor.open(in: directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        } catch {
            if error.rawValue != ENOENT && error.rawValue != ELOOP && error.rawValue != ENOTDIR {
                notExamined(path, because: error.description)
            }
            return nil
        }
    }

    /// Records that `path` could not be examined (`WipeReport.unexamined` and a note).
    private mutating func notExamined(_ path: String, because reason: String) {
        report.unexamined += 1
        report.notes.append("\(path): not examined: \(reason); any of the account's data there is still on disk")
    }

    /// Removes the rewrite temp files in `directory` that a killed writer left
    /// (`WriterTemporaryName.isLeftOver`) beside a target that is the owner's file: a decrypt
    /// killed between its link and rename leaves the plaintext of a file this wipe removes.
    /// Done before the walk removes the targets. A temp file beside no such target stays.
    private mutating func removeLeftOverTemporaries(in directory: Int32, path: String, entries: [EntryName]) {
        for entry in entries where WriterTemporaryName.isLeftOver(entry.text) {
            guard let target = WriterTemporaryName.target(of: entry.text),
                  let file = try? FileDescriptor.open(in: directory, target, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC),
                  let st = try? file.stat(), (st.st_mode & S_IFMT) == S_IFREG,
                  (try? ProtectedFileHeader.read(fd: file.rawValue))??.owner == owner else { continue }
            var temp = stat()
            guard fstatat(directory, entry.bytes, &temp, AT_SYMLINK_NOFOLLOW) == 0, (temp.st_mode & S_IFMT) == S_IFREG,
                  unlinkat(directory, entry.bytes, 0) == 0 else { continue }
            report.removedTemporaries += 1
            removed?(PathName.appending(entry.text, to: path))
        }
    }

    /// Removes the directory `name` in `directory` if it is still the one walked (`expected`)
    /// and empty; rmdir itself refuses one that is not empty.
    private func removeDirectory(_ name: [CChar], in directory: Int32, expected: stat) -> Bool {
        var now = stat()
        guard fstatat(directory, name, &now, AT_SYMLINK_NOFOLLOW) == 0, (now.st_mode & S_IFMT) == S_IFDIR,
              now.st_ino == expected.st_ino, now.st_dev == expected.st_dev else { return false }
        return unlinkat(directory, name, AT_REMOVEDIR) == 0
    }

    /// Removes everything inside `directory` (a provider temp area), staying on `device`, down
    /// to `TreeDepth.maximum` levels below it (`depth`: this directory's; deeper is noted).
    private mutating func purge(_ directory: Int32, path: String, kernelPath: String?, device: dev_t, depth: Int = 0) {
        guard depth < TreeDepth.maximum else {
            notExamined(path, because: "more than \(TreeDepth.maximum) directory levels below the temp area")
            return
        }
        for entry in DirectoryEntries.names(of: directory) {
            let name = entry.bytes
            let childKernelPath = kernelPath.map { PathName.appending(entry.text, to: $0) }
            var st = stat()
            guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                guard st.st_dev == device, !mountPoints.contains(childKernelPath) else {
                    report.notes.append("\(PathName.appending(entry.text, to: path)): not crossed, it is a mount point (another filesystem)")
                    continue
                }
                do {
                    let fd = try FileDescriptor.open(in: directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    purge(fd.rawValue, path: PathName.appending(entry.text, to: path), kernelPath: childKernelPath, device: device,
                          depth: depth + 1)
                } catch {
                    continue
                }
                if unlinkat(directory, name, AT_REMOVEDIR) == 0 { report.removedTemporaries += 1 }
            } else if unlinkat(directory, name, 0) == 0 {
                report.removedTemporaries += 1
            }
        }
    }

}
