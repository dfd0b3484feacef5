import Foundation
import MAMProtection
import MAMSystem

/// How long a change that found the remote unreachable waits before its next attempt: `base`
/// seconds after the first failure, doubling after each further one, at most `cap` seconds.
public struct RetrySchedule: Equatable, Sendable {
    /// Seconds after the first failure (> 0).
    public var base: Double
    /// The longest wait in seconds.
    public var cap: Double

    public init(base: Double = 1, cap: Double = 300) {
        self.base = base
        self.cap = cap
    }

    /// Seconds to wait after `attempts` failed attempts (1 = the first failure).
    public func delay(afterAttempts attempts: Int) -> Double {
        let doublings = Double(max(0, min(attempts - 1, 40)))
        return min(cap, base * pow(2, doublings))
    }
}

/// What a queue replay ended with.
public enum ReplayOutcome: Equatable, Sendable {
    /// Every change reached the remote (or failed for good and was logged).
    case empty
    /// The first waiting change is retried at this time (seconds since 1970): the remote was
    /// unreachable.
    case waiting(until: Double)
}

/// Finds the objects of a queued change when it runs, in the process that recorded it (by
/// identity: the entry's descriptor, an O_PATH descriptor), and calls `apply` with their
/// current absolute paths (nil: gone), holding whatever lock they need. Returns false when it
/// has nothing for the entry: the paths recorded in the queue are used then.
public typealias QueuedChangeLocator = (_ entry: QueuedEntry,
                                        _ apply: (_ path: String?, _ otherPath: String?) throws -> Void) throws -> Bool

/// The durable upload queue of `NonReplicatedProvider`: every local change the mount hands
/// over is recorded (`record`) before its remote work starts and leaves the queue when the
/// remote has it. `replayQueue` runs the changes in order; a change that finds the remote
/// unreachable stays (with the changes behind it) and is retried on a `RetrySchedule`; one that
/// fails for good (policy refusal, conflict, a local object gone) leaves the queue with a log
/// line. Replays are serialized across processes (`flock` on `.mamfs-provider/queue.lock`), so
/// a mount and `mamfs provider sync` never run the same change twice at once.
extension NonReplicatedProvider {
    /// Records `change` at the end of the queue (see `UploadQueue` for coalescing).
    /// - Returns: its sequence number (that of the change it was merged into).
    /// - Throws: SQLite errors.
    @discardableResult
    public func record(_ change: QueuedChange) throws -> Int64 { try queue.append(change) }

    /// `localPath` as the queue records it: relative to the local root (unchanged when outside).
    public func queuePath(of localPath: String) -> String { layout.relativePath(of: localPath) ?? localPath }

    /// The waiting changes, in order.
    public func queuedEntries() throws -> [QueuedEntry] { try queue.entries() }

    /// Count, oldest age, next retry, last error of the queue.
    public func queueStatus() throws -> UploadQueueStatus { try queue.status() }

    /// One pass with the remote, as a mount starts it and `mamfs provider sync` runs it: the
    /// queue replayed first (ignoring the retry schedule), then the files with local changes
    /// no queued change covers (`uploadPendingChanges`), then the placeholders refreshed
    /// (`createPlaceholders`) — only once the queue is empty, so a refresh never brings back
    /// an item whose local delete or rename is still waiting.
    /// - Returns: the report; queued changes count as created (mkdir, link), modified,
    ///   deleted remotely or moved remotely; a queue left waiting makes it incomplete (an
    ///   EHOSTUNREACH error).
    public func syncPass(schedule: RetrySchedule = RetrySchedule(), log: (String) -> Void = { _ in },
                         progress: ((SyncProgress) -> Void)? = nil) -> SyncReport {
        withQueueLock {
            var report = SyncReport()
            // A replaced remote or a wiped account: nothing runs, and the message says why
            // (for a replaced remote it names `mamfs provider reattach`).
            do {
                try binding.checkBeforePass()
            } catch {
                report.errors.append(SyncIssue(path: "", error: ProviderError.mam(error)))
                report.complete = false
                return report
            }
            try? queue.clearRunning()
            let outcome = replayLocked(schedule: schedule, ignoringBackoff: true, locate: nil, log: log, report: &report)
            if case .waiting = outcome {
                let waiting = (try? queue.entries().count) ?? 0
                report.errors.append(SyncIssue(path: "", error: MAMError.system(
                    "\(waiting) queued changes wait for the remote (unreachable)", errno: EHOSTUNREACH)))
                report.complete = false
                return report
            }
            // One counter for both phases, so what is reported never goes down between them.
            let counter = SyncProgressCounter(progress)
            let pending = uploadPendingChanges(counter: counter)
            report.created += pending.created
            report.modified += pending.modified
            report.refused += pending.refused
            report.errors += pending.errors
            guard pending.complete else {
                report.complete = false
                return report
            }
            do {
                let placed = try createPlaceholders(counter: counter)
                report.fetched += placed.fetched
                report.placeholders += placed.placeholders
                report.deletedLocally += placed.deletedLocally
                report.movedLocally += placed.movedLocally
                report.errors += placed.errors
                report.complete = placed.complete
                report.anchor = placed.anchor
            } catch {
                report.errors.append(SyncIssue(path: "", error: error))
                report.complete = false
            }
            return report
        }
    }

    /// Runs the waiting changes in order until the queue is empty or the remote is
    /// unreachable. `ignoringBackoff`: run the first change even when its retry is not due.
    /// `locate` finds an entry's objects by identity (nil: by the recorded paths). Problems
    /// are logged through `log`, one line each.
    public func replayQueue(schedule: RetrySchedule, ignoringBackoff: Bool = false,
                            locate: QueuedChangeLocator? = nil, log: (String) -> Void) -> ReplayOutcome {
        withQueueLock {
            var report = SyncReport()
            return replayLocked(schedule: schedule, ignoringBackoff: ignoringBackoff, locate: locate, log: log, report: &report)
        }
    }

    private func replayLocked(schedule: RetrySchedule, ignoringBackoff: Bool, locate: QueuedChangeLocator?,
                              log: (String) -> Void, report: inout SyncReport) -> ReplayOutcome {
        while true {
            let entry: QueuedEntry
            do {
                guard let first = try queue.first() else { return .empty }
                entry = first
            } catch {
                log("provider: upload queue: \(error)")
                return .empty
            }
            let now = Date().timeIntervalSince1970
            if !ignoringBackoff, let next = entry.nextRetry, next > now { return .waiting(until: next) }
            try? queue.markRunning(entry.sequence)
            let change = entry.change
            do {
                // A remote that is not the volume it was (being restored from a copy, say) is
                // unreachable to the queue: no row runs against it before `provider reattach`.
                try binding.checkBeforePass()
                let located = try locate?(entry) { path, otherPath in
                    try apply(change, path: path, otherPath: otherPath)
                } ?? false
                if !located {
                    // By path: where the objects are once the later changes happened locally.
                    let later = ((try? queue.entries()) ?? []).filter { $0.sequence > entry.sequence }.map(\.change)
                    let path = Self.forwarded(change.path, through: later)
                    let other = change.kind == .exchanged ? change.otherPath.flatMap { Self.forwarded($0, through: later) }
                                                          : change.otherPath
                    try apply(change, path: path.flatMap(existingPath), otherPath: other.flatMap(existingPath))
                }
                count(change, in: &report)
            } catch where Self.isUnreachable(error) || Self.waitsForUnlock(error, binding.context) {
                let delay = schedule.delay(afterAttempts: entry.attempts + 1)
                let due = Date().timeIntervalSince1970 + delay
                try? queue.markFailed(entry.sequence, error: "\(error)", nextRetry: due)
                log("provider: \(change.path): not uploaded (\(change.kind.rawValue) queued, retried in \(delay) s): \(error)")
                return .waiting(until: due)
            } catch {
                log("provider: \(change.path): \(Self.failure(change.kind)): \(error)")
            }
            do { try queue.remove(entry.sequence) } catch {
                log("provider: upload queue: \(error)")
                return .empty
            }
        }
    }

    /// Where the object a queued change found at `path` is once the `later` changes of the
    /// queue happened locally (they all did before a replay by another process): their
    /// renames (recorded with the old path) and exchanges applied in order, a directory's
    /// taking what is below it along. nil when a later change removed the object or renamed
    /// another one over it. A rename recorded without its old path (by an older mamfs) is
    /// not followed.
    static func forwarded(_ path: String, through later: [QueuedChange]) -> String? {
        var current = path
        for change in later {
            switch change.kind {
            case .renamed:
                guard let from = change.otherPath else { continue }
                if ExactName.isSelfOrBelow(current, from) {
                    current = change.path + ExactName.dropPrefix(current, from)
                } else if ExactName.isSelfOrBelow(current, change.path) {
                    return nil
                }
            case .exchanged:
                guard let other = change.otherPath else { continue }
                if ExactName.isSelfOrBelow(current, change.path) {
                    current = other + ExactName.dropPrefix(current, change.path)
                } else if ExactName.isSelfOrBelow(current, other) {
                    current = change.path + ExactName.dropPrefix(current, other)
                }
            case .removed:
                if ExactName.isSelfOrBelow(current, change.path) { return nil }
            case .changed, .madeDirectory, .linked:
                continue
            }
        }
        return current
    }

    private func count(_ change: QueuedChange, in report: inout SyncReport) {
        switch change.kind {
        case .changed: report.modified += 1
        case .removed: report.deletedRemotely += 1
        case .renamed, .exchanged: report.movedRemotely += 1
        case .madeDirectory, .linked: report.created += 1
        }
    }

    private static func failure(_ kind: QueuedChange.Kind) -> String {
        switch kind {
        case .changed: return "not uploaded"
        case .removed: return "remote item not deleted"
        case .renamed: return "remote rename not done"
        case .exchanged: return "remote exchange not done"
        case .madeDirectory: return "remote directory not made"
        case .linked: return "hard link not uploaded"
        }
    }

    /// Whether `error` is a key the session lock withholds (`fileProtectionLevel`): the change
    /// waits for the unlock like one the remote did not take, instead of being given up.
    static func waitsForUnlock(_ error: any Error, _ context: ProtectionContext) -> Bool {
        guard case MAMError.keyUnavailable = error else { return false }
        return !context.withheldAccounts.isEmpty
    }

    static func isUnreachable(_ error: any Error) -> Bool {
        if case RemoteError.unreachable = error { return true }
        return (error as? MAMError)?.errno == EHOSTUNREACH
    }

    /// The absolute path of `relative` when something is there (nil: gone).
    private func existingPath(_ relative: String) -> String? {
        guard let tree = try? tree(), tree.lstat(relative) != nil else { return nil }
        return layout.absolutePath(relative)
    }

    /// Holds `.mamfs-provider/queue.lock` around `body` (replays of one root, one at a time).
    private func withQueueLock<T>(_ body: () -> T) -> T {
        let fd = open(layout.metadataDirectory + "/queue.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        if fd >= 0 { while flock(fd, LOCK_EX) != 0 && errno == EINTR {} }
        defer { if fd >= 0 { flock(fd, LOCK_UN); close(fd) } }
        return body()
    }

    // MARK: Applying one change

    /// The remote side of `change`, its objects now at `path` / `otherPath` (absolute; nil:
    /// gone).
    private func apply(_ change: QueuedChange, path: String?, otherPath: String?) throws {
        switch change.kind {
        case .changed:
            guard let path, let st = FileSystem.lstatPath(path), FileSystem.isRegular(st) else { return }
            try itemChanged(localPath: path)
        case .removed:
            guard let item = change.item else { return }
            try deleteItem(withIdentifier: item, baseVersion: change.baseVersion)
        case .renamed:
            try applyRename(current: path, change: change)
        case .exchanged:
            try itemsExchanged(path, otherPath)
        case .madeDirectory:
            guard let path, let st = FileSystem.lstatPath(path), FileSystem.isDirectory(st) else { return }
            try directoryMade(localPath: path)
        case .linked:
            guard let path else { return }
            try itemLinked(localPath: path)
        }
    }

    /// A rename recorded as `change`, the renamed object now at `current` (see `itemRenamed`).
    /// A directory without an item (made locally, not on the remote yet) is made remotely.
    private func applyRename(current: String?, change: QueuedChange) throws {
        guard let current else {
            // Gone since (removed by a later request): so is what it replaced.
            if let replaced = change.item { try deleteItem(withIdentifier: replaced, baseVersion: change.baseVersion) }
            return
        }
        let tree = try tree()
        let relative = layout.relativePath(of: current) ?? ""
        let isItem = !relative.isEmpty && tree.getAttribute(relative, LocalItemAttributes.itemAttribute) != nil
        let st = FileSystem.lstatPath(current)
        if let replaced = change.item, change.replacedSize == nil {
            // A directory (or an item without file attributes) was replaced.
            try deleteItem(withIdentifier: replaced, baseVersion: change.baseVersion)
            if isItem { try itemRenamed(localPath: current, replaced: nil) }
            return
        }
        if !isItem, let st, FileSystem.isDirectory(st) {
            if let replaced = change.item { try deleteItem(withIdentifier: replaced, baseVersion: change.baseVersion) }
            try directoryMade(localPath: current)
            return
        }
        let isFile = st.map(FileSystem.isRegular) ?? false
        guard isItem || isFile || change.item != nil else { return }
        try itemRenamed(localPath: current, replaced: change.replacedAttributes)
    }

    /// Makes the remote directory of a local directory made through the mount (and its missing
    /// parents); nothing when it has its item already.
    /// - Throws: remote errors as `MAMError` (`.system(EBUSY)` when a file has the name remotely).
    public func directoryMade(localPath: String) throws {
        try ProviderError.mapped {
            guard let relative = layout.relativePath(of: localPath), !relative.isEmpty else { return }
            _ = try ensureRemoteDirectory(relative, in: try tree())
        }
    }

    /// The remote has no hard links: a new name made for a local file is uploaded as its own
    /// remote item (the current contents; a placeholder's are copied from its remote item).
    /// Later changes of the shared contents go to the item whose attributes the file carries.
    /// - Returns: the new item (nil: not a regular file).
    /// - Throws: `.policyDenied`, remote errors as `MAMError` (`.system(EBUSY)` when the name is
    ///   taken remotely).
    @discardableResult
    public func itemLinked(localPath: String) throws -> FileProviderItem? {
        try ProviderError.mapped {
            guard let relative = layout.relativePath(of: localPath), !relative.isEmpty else { return nil }
            let tree = try tree()
            guard let st = tree.lstat(relative), FileSystem.isRegular(st) else { return nil }
            let copy: PlainBuffer
            if let attributes = LocalItemAttributes.read(relative, in: tree), attributes.isPlaceholder {
                copy = try PlainBuffer(name: "mamfs-download")
                _ = try binding.remote.readContents(of: attributes.identifier, into: copy.url)
            } else {
                copy = try ProviderRules.plainCopyForUpload(relative: relative, in: tree, receiver: binding.accountId,
                                                            context: binding.context).copy
            }
            let parent = try ensureRemoteDirectory(PathName.parent(of: relative), in: tree)
            let item = try binding.remote.create(parent: parent, name: FileSystem.lastComponent(relative), contents: .file(copy.url))
            remember(item, relative: relative)
            return domain.protectFileProviderItem(item)
        }
    }

    /// The remote item uploaded for the hard link at `localPath` (`itemLinked`), nil when the
    /// name is the file's own item or has none.
    public func linkedItem(localPath: String) -> ItemIdentifier? {
        guard let relative = layout.relativePath(of: localPath), let tree = try? tree(),
              let record = try? binding.database.item(localPath: relative) else { return nil }
        let own = tree.getAttribute(relative, LocalItemAttributes.itemAttribute)
        return own == record.identifier.rawValue ? nil : record.identifier
    }

    /// The remote side of RENAME_EXCHANGE of the local objects now at `pathA` and `pathB`
    /// (absolute; nil: gone): each remote item goes to the name its local object has now, so
    /// each name keeps uploading to the remote item of that name. Two provided items take
    /// three moves: the item that is to leave A's remote name goes to a temporary name
    /// (`.NAME.mamfs-exchange-RANDOM`), the other one takes A's name, the first takes B's. The
    /// local attributes follow each step, so a retry after a failure goes on where it stopped;
    /// when the second move fails for another reason than an unreachable remote the first is
    /// undone. An object without an item is uploaded (a file) or made (a directory) after the
    /// other one moved.
    /// - Throws: remote errors as `MAMError`.
    public func itemsExchanged(_ pathA: String?, _ pathB: String?) throws {
        try ProviderError.mapped {
            let tree = try tree()
            let paths = [pathA, pathB].compactMap { $0 }.compactMap { path -> (String, String)? in
                guard let relative = layout.relativePath(of: path), !relative.isEmpty else { return nil }
                return (path, relative)
            }
            let items = paths.filter { tree.getAttribute($0.1, LocalItemAttributes.itemAttribute) != nil }
            guard items.count == 2 else {
                for (path, _) in items { try itemMoved(localPath: path) }
                for (path, relative) in paths where tree.getAttribute(relative, LocalItemAttributes.itemAttribute) == nil {
                    guard let st = tree.lstat(relative) else { continue }
                    if FileSystem.isDirectory(st) { try directoryMade(localPath: path) }
                    else if FileSystem.isRegular(st) { try itemChanged(localPath: path) }
                }
                return
            }
            let (a, b) = (items[0], items[1])
            // b's object holds the item still under a's remote name: it moves aside first.
            if let occupant = try remoteOccupant(of: a.1, in: tree),
               occupant.identifier.rawValue != tree.getAttribute(a.1, LocalItemAttributes.itemAttribute) {
                guard let idB = tree.getAttribute(b.1, LocalItemAttributes.itemAttribute),
                      occupant.identifier.rawValue == idB else {
                    throw RemoteError.conflict(occupant.identifier, current: occupant.version)
                }
                let aside = try binding.remote.move(occupant.identifier, toParent: occupant.parentIdentifier,
                                                    newName: ".\(occupant.filename).mamfs-exchange-\(UInt32.random(in: 0...UInt32.max))")
                try tree.setAttribute(b.1, LocalItemAttributes.itemAttribute, aside.identifier.rawValue)
                do {
                    try itemMoved(localPath: a.0)
                } catch where !Self.isUnreachable(error) {
                    // Undo the first move: both remote items as they were.
                    if let back = try? binding.remote.move(aside.identifier, toParent: occupant.parentIdentifier,
                                                           newName: occupant.filename) {
                        try? tree.setAttribute(b.1, LocalItemAttributes.itemAttribute, back.identifier.rawValue)
                    }
                    throw error
                }
            } else {
                try itemMoved(localPath: a.0)
            }
            try itemMoved(localPath: b.0)
            for (path, relative) in items where tree.lstat(relative).map(FileSystem.isRegular) ?? false {
                try itemChanged(localPath: path)
            }
        }
    }

    /// The remote item under the name `relative` has locally (nil: none).
    private func remoteOccupant(of relative: String, in tree: ConfinedDirectory) throws -> RemoteItem? {
        let parent = try ensureRemoteDirectory(PathName.parent(of: relative), in: tree)
        let name = FileSystem.lastComponent(relative)
        return try binding.remote.enumerate(container: parent).first { ExactName.equal($0.filename, name) }
    }
}
