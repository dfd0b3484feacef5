import Foundation
import MAMProtection
import MAMSystem

/// Items of a replicated pass on their way into the replica, made durable a batch at a time
/// instead of with an fsync of every file and directory.
///
/// An entry is a finished provided copy in this process's temp area (a file or a symlink,
/// never under its final name yet), a directory to make, or an item already in place whose
/// record alone waits (a local copy the pass found identical to the remote item). `commit`
/// keeps this order:
///
/// 1. syncfs(2) of the replica's filesystem: every copy's bytes are on disk;
/// 2. in the order the entries were added (a directory before what goes into it): each
///    directory is made, each copy renamed to its final name: a new item with
///    RENAME_NOREPLACE, a replaced one only while the local item still has the stamp it was
///    last synced with (`expecting`);
/// 3. syncfs again: the directories and renames are on disk;
/// 4. only then does the caller record the items that are in place (`Outcome.placed`).
///
/// So a crash at any point leaves no partly written file under a final name (a name appears
/// only after its bytes are durable), no record of an item whose file is not durably in place,
/// and temp files only in a session directory the next run sweeps. Files renamed in but not yet
/// recorded (a crash between 2 and 4) are found identical to their remote items by the next
/// pass and recorded then (`ReplicatedSyncPass.adoptIfIdentical`), not kept as conflict copies.
final class ProvidedCopyBatch<Payload> {
    /// When a batch is committed: at this many entries or this many bytes of provided copies,
    /// whichever comes first (and at the end of each pass step).
    struct Limits: Equatable, Sendable {
        var items: Int
        var bytes: Int64

        /// Two syncfs per 512 items: about 20 for a tree of 5,000 files, while a crash costs at
        /// most 512 downloads again.
        static var standard: Limits { Limits(items: 512, bytes: 64 << 20) }
    }

    /// What an entry puts at its path.
    enum Source {
        /// A finished copy in the temp area, renamed in.
        case copy(TemporaryFile)
        /// A new directory with this mode.
        case directory(mode_t)
        /// Nothing: the item is in place already.
        case inPlace
    }

    /// One item of the batch.
    struct Entry {
        /// The item's path below the replica root.
        let relative: String
        /// What goes there.
        let source: Source
        /// Replace (or, for an item in place, keep) the local item only while it still has this
        /// stamp; nil: a copy must not replace anything (RENAME_NOREPLACE).
        let expecting: LocalStamp?
        /// The item's stamp once in place, when known now (a rename keeps inode, size and
        /// mtime); nil: read after the commit.
        var stamp: LocalStamp? = nil
        /// What the caller records once the item is placed.
        let payload: Payload
    }

    /// What became of an entry at `commit`.
    enum Outcome {
        /// In place and durable: the caller may record it.
        case placed
        /// Not placed (its temp file is removed) or not known durable: not to be recorded.
        case failed(any Error)
    }

    let limits: Limits
    private var entries: [Entry] = []
    private var bytes: Int64 = 0

    init(limits: Limits) {
        self.limits = limits
    }

    var isEmpty: Bool { entries.isEmpty }
    var isFull: Bool { entries.count >= limits.items || bytes >= limits.bytes }

    /// Adds an entry; `bytes` is what its copy holds (0 for an item in place).
    func add(_ entry: Entry, bytes: Int64 = 0) {
        entries.append(entry)
        self.bytes += bytes
    }

    /// Puts every entry in place durably, in the order described on the type, and empties the
    /// batch. A failed sync fails every entry it should have covered; a failed rename (the local
    /// item changed or appeared, its directory gone or not writable) fails only its own entry.
    ///
    /// - Parameters:
    ///   - tree: the replica.
    ///   - sync: makes the replica's filesystem durable (`ReplicaSync.sync`).
    /// - Returns: each entry with its outcome, in the order they were added.
    func commit(in tree: ConfinedDirectory, sync: () throws -> Void) -> [(entry: Entry, outcome: Outcome)] {
        let batch = entries
        entries = []
        bytes = 0
        guard !batch.isEmpty else { return [] }
        do {
            try sync()
        } catch {
            return batch.map { ($0, .failed(error)) }
        }
        var results: [(entry: Entry, outcome: Outcome)] = []
        var changed = false
        let directories = DirectoryDescriptors(tree)
        for entry in batch {
            do {
                try place(entry, in: tree, directories: directories)
                if case .inPlace = entry.source {} else { changed = true }
                results.append((entry, .placed))
            } catch {
                results.append((entry, .failed(error)))
            }
        }
        directories.close()
        if changed {
            do {
                try sync()
            } catch {
                // In place, but not known durable: none of them may be recorded.
                return results.map { result in
                    if case .placed = result.outcome { return (result.entry, .failed(error)) }
                    return result
                }
            }
        }
        return results
    }

    private func place(_ entry: Entry, in tree: ConfinedDirectory, directories: DirectoryDescriptors) throws {
        if let expecting = entry.expecting {
            guard tree.lstat(entry.relative).map(LocalStamp.init) == expecting else {
                throw MAMError.system("\(entry.relative) changed during the sync; retried next pass", errno: EAGAIN)
            }
        }
        let name = FileSystem.lastComponent(entry.relative)
        switch entry.source {
        case .inPlace:
            return
        case .directory(let mode):
            let parent = try directories.descriptor(PathName.parent(of: entry.relative))
            guard mkdirat(parent, name, mode) == 0 else {
                if errno == EEXIST { throw Self.appeared(entry.relative) }
                throw MAMError.fromErrno("mkdir \(entry.relative)")
            }
        case .copy(let temp):
            let from = try directories.descriptor(PathName.parent(of: temp.relative))
            let to = try directories.descriptor(PathName.parent(of: entry.relative))
            do {
                try temp.place(fromDirectory: from, toDirectory: to, name: name, noReplace: entry.expecting == nil)
            } catch MAMError.system(_, let code) where code == EEXIST && entry.expecting == nil {
                throw Self.appeared(entry.relative)
            }
        }
    }

    private static func appeared(_ relative: String) -> MAMError {
        MAMError.cannotCreateOutput("\(relative) appeared during the sync; retried next pass")
    }
}

/// O_PATH descriptors of directories below a `ConfinedDirectory` (opened without following any
/// symlink), each opened once while a batch is put in place; names compared as exact bytes.
private final class DirectoryDescriptors {
    private let tree: ConfinedDirectory
    private var open = ExactDictionary<Int32>()

    init(_ tree: ConfinedDirectory) {
        self.tree = tree
    }

    /// The descriptor of `relative` ("" = the root).
    /// - Throws: `MAMError.system` with the errno (ENOENT, ENOTDIR, ELOOP for a symlink).
    func descriptor(_ relative: String) throws -> Int32 {
        if let fd = open[relative] { return fd }
        let fd = tree.open(relative, SystemConstants.pathOnly | O_DIRECTORY)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(relative.isEmpty ? "the replica" : relative)") }
        open[relative] = fd
        return fd
    }

    func close() {
        for fd in open.values { SystemCall.close(fd) }
        open = ExactDictionary()
    }

    deinit { close() }
}
