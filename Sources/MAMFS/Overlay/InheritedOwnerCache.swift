import Glibc
import MAMSystem
import Synchronization

/// The answers of the owner walk (`OverlayFilesystem.inheritedOwner(of:)`) per directory,
/// kept while no directory the walk read changed.
///
/// Each answer depends on the levels the walk read, from the directory up to the first tagged
/// one or the backing root: their tags and their places. Every such level is watched
/// (`DirectoryChangeWatch`: an attribute set, a move, a removal, by the mount or by any other
/// process on the backing tree) before its tag is read, and any event, or a change of the mount
/// table, drops every answer. Both are checked before each answer is given, so a change that
/// completed before a create began is seen by it. An answer is kept only when the walk read
/// every level's tag and every level it read is watched and on the backing root's filesystem,
/// which must be one that notifies every change (`FilesystemType.changesAreNotified`);
/// otherwise the walk runs on every create, as without the cache.
final class InheritedOwnerCache: @unchecked Sendable {
    /// Answers kept at most (all are dropped when full: a directory's next create walks again).
    static let capacity = 4096
    /// Marks placed at most before all are removed and the answers with them: the kernel keeps
    /// a marked directory's inode in memory.
    static let markLimit = 4096

    private struct State {
        let watch: DirectoryChangeWatch
        var owners: [BackingKey: String] = [:]
        /// The levels marked since the last change (a removed directory's mark goes with it,
        /// and its inode number may then come back: the set is emptied with every change).
        var watched: Set<BackingKey> = []
        /// Counts the drops: a walk begun before a drop does not store its answer.
        var generation: UInt64 = 0

        mutating func drainChanges() {
            guard watch.drainChanges() else { return }
            dropAll()
        }

        mutating func dropAll() {
            owners.removeAll(keepingCapacity: true)
            watched.removeAll(keepingCapacity: true)
            generation &+= 1
        }
    }

    private let state: Mutex<State>
    /// The backing root's device: levels elsewhere (another filesystem mounted below it) are
    /// not cached.
    let device: UInt64

    /// nil when the backing root's filesystem does not notify every change, or fanotify is
    /// unavailable (the walk then runs every time).
    init?(rootFD: Int32, rootKey: BackingKey) {
        guard FilesystemType.changesAreNotified(on: rootFD), let watch = try? DirectoryChangeWatch() else { return nil }
        state = Mutex(State(watch: watch))
        device = rootKey.device
    }

    /// What a walk about to start needs: the kept answer for the directory `key`, else the
    /// generation to hand to `store`.
    func lookup(_ key: BackingKey) -> (owner: String?, generation: UInt64) {
        state.withLock { state in
            state.drainChanges()
            return (state.owners[key], state.generation)
        }
    }

    /// Watches a level of a walk (call before reading its tag): `levelFD` open for reading,
    /// or O_PATH (`pathOnly`).
    /// - Returns: false when it cannot be watched (another filesystem, no read permission, the
    ///   kernel's marks used up): the walk's answer is then not kept.
    func watch(levelFD: Int32, pathOnly: Bool, status st: stat) -> Bool {
        let key = BackingKey(st)
        guard key.device == device else { return false }
        return state.withLock { state in
            if state.watched.contains(key) { return true }
            if state.watch.marksPlaced >= Self.markLimit {
                state.watch.unwatchAll()
                state.dropAll()
            }
            guard (try? state.watch.watch(levelFD, pathOnly: pathOnly)) != nil else { return false }
            state.watched.insert(key)
            return true
        }
    }

    /// Keeps `owner` for the directory `key`, unless something changed since `generation`.
    func store(_ owner: String, for key: BackingKey, generation: UInt64) {
        state.withLock { state in
            state.drainChanges()
            guard state.generation == generation else { return }
            if state.owners.count >= Self.capacity { state.owners.removeAll(keepingCapacity: true) }
            state.owners[key] = owner
        }
    }

    /// Marks placed since the last flush.
    var marksPlaced: Int { state.withLock { $0.watch.marksPlaced } }
}
