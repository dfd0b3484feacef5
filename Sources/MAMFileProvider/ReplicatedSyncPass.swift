import Foundation
import MAMProtection
import MAMSystem

/// One sync pass of the replicated provider.
///
/// Order (each step records its result in the item database at once, so a pass cut short
/// leaves a consistent state for the next one):
/// 1. list the remote (failure: stop, nothing touched) and scan the replica;
/// 2. local moves and renames -> `RemoteStore.move` (an item's recorded inode found at another
///    path); a moved directory's descendants are re-keyed from a listing of its new place;
/// 3. remote renames -> local renames (an item gone from the remote and one new on it with the
///    same `fileID`, else with the same type and contentVersion); the item keeps its stable
///    identifier (ProviderDatabase+Identities; every row saved records it);
/// 4. each known item, deepest first, by (local state, remote state):
///
///    | local \ remote | unchanged         | changed              | deleted                 |
///    |----------------|-------------------|----------------------|-------------------------|
///    | unchanged      | —                 | fetchContents        | delete locally          |
///    | changed        | modifyItem        | conflict: keep both  | createItem (kept)       |
///    | deleted        | deleteItem        | fetch again (kept)   | forget                  |
///
///    (a directory is "changed" on neither side; deleting one that is not empty keeps it);
/// 5. new remote items -> fetched (a new local item with the same name is kept under a
///    conflict name and uploaded in step 6);
/// 6. new local items -> createItem (directories first).
///
/// Names and paths are compared as exact bytes (`ExactDictionary`, byte-exact
/// `ItemIdentifier`): two remote names that Unicode calls equal stay two items. Every replica
/// operation goes through `ConfinedDirectory`: no symlink is followed (a planted one makes the
/// step fail with ELOOP, reported), nothing outside the replica is reached. A local name that is
/// not valid UTF-8 is skipped and reported.
final class ReplicatedSyncPass {
    struct LocalEntry {
        var type: ItemType
        var stamp: LocalStamp
    }

    /// Thrown to stop a pass (the remote became unreachable); the issue is already reported.
    struct Stop: Error {}

    let binding: ProviderBinding
    let counter: SyncProgressCounter
    var report = SyncReport()
    var rows: [ItemIdentifier: ItemRecord] = [:]
    var pathIndex = ExactDictionary<ItemIdentifier>()
    var remote: [ItemIdentifier: RemoteItem] = [:]
    var remotePaths: [ItemIdentifier: String] = [:]
    /// Items the store's file ids show moved on the remote: old store identifier -> new one
    /// (`ProviderDatabase.reconcileIdentities`).
    var remoteMoves: [ItemIdentifier: ItemIdentifier] = [:]
    var local = ExactDictionary<LocalEntry>()

    /// The replica, opened once for the pass.
    let tree: ConfinedDirectory
    /// Held while the local tree is read (see `ReplicatedProvider.renamingLocally`).
    let scanLock: NSLock

    /// What a fetched item's record needs once the batch put it in place.
    struct Placement: Sendable {
        /// The remote item at the version fetched.
        var item: RemoteItem
        /// The row the new one takes the place of (the item's old record), if any.
        var replacing: ItemIdentifier?
    }

    /// Fetched items not yet durable, in place and recorded (`fetchContents`, `commitFetched`).
    let batch: ProvidedCopyBatch<Placement>
    /// Files being downloaded and encrypted beside the pass (`fetchContents`), in groups
    /// (`submitFetches`): three groups at once (on two CPUs the fastest of 1-4 for a first sync
    /// of /usr/share/doc, docs/PERFORMANCE.md), and up to a batch of files queued, so the
    /// downloads go on while a batch is committed.
    let fetches: BoundedJobs<[FetchedCopy]>
    /// Fetches waiting to be handed to a worker (`submitFetches`), and their listed bytes.
    var pendingFetches: [FetchRequest] = []
    var pendingFetchBytes: Int64 = 0
    /// Set when a fetch found the remote unreachable: the pass stops after the batch.
    var remoteUnreachable = false
    /// Set by `fetchContents` when the item's fetch runs beside the pass: the item is counted
    /// as handled (`tick`) when its copy is staged, so the bytes it moved are in the progress.
    var tickWhenStaged = false
    let durability: ReplicaSync
    /// The replica root opened for reading before the pass writes anything: syncfs reports the
    /// writeback errors of its filesystem since this descriptor was opened.
    let syncDescriptor: Int32

    /// - Throws: `MAMError.system` when the replica cannot be opened.
    init(binding: ProviderBinding, scanLock: NSLock, batchLimits: ProvidedCopyBatch<Placement>.Limits,
         durability: ReplicaSync, progress: ((SyncProgress) -> Void)?) throws {
        self.binding = binding
        self.scanLock = scanLock
        counter = SyncProgressCounter(progress)
        tree = try binding.layout.confined()
        batch = ProvidedCopyBatch(limits: batchLimits)
        fetches = BoundedJobs(width: 3, backlog: max(1, batchLimits.items / Self.fetchGroupItems), label: "mamfs-fetch")
        self.durability = durability
        let fd = tree.open("", O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(binding.layout.root)") }
        syncDescriptor = fd
    }

    deinit { SystemCall.close(syncDescriptor) }

    var layout: ProviderLayout { binding.layout }
    var store: any RemoteStore { binding.remote }
    var database: ProviderDatabase { binding.database }
    var owner: String { binding.accountId }

    func run() -> SyncReport {
        do {
            try binding.checkBeforePass()
            let rows = try database.allItems()
            let tree = try layout.confined()
            try binding.checkRemoteNotEmptied(knownLocalItems: rows.filter {
                $0.identifier != .rootContainer && !$0.localPath.isEmpty && tree.lstat($0.localPath) != nil
            }.count)
            for row in rows { setRow(row, replacing: nil) }
            try loadRemote()
        } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            report.complete = false
            report.anchor = (try? database.anchor()) ?? 0
            return report
        }
        scanLock.lock()
        scanLocal("")
        scanLock.unlock()
        counter.expect(items: rows.count + max(0, remote.count - rows.count) + max(0, local.count - rows.count))
        do {
            if try pushLocalMoves() { try attemptStep("") { try loadRemote() } }
            try applyRemoteRenames()
            counter.expect(items: 0, bytes: expectedBytes())
            try reconcileKnownItems()
            commitFetched()
            if remoteUnreachable { throw Stop() }
            try fetchNewRemoteItems()
            commitFetched()
            if remoteUnreachable { throw Stop() }
            try uploadNewLocalItems()
        } catch {
            // Stopped (the remote went away): what was fetched before still goes in.
            commitFetched()
            report.complete = false
        }
        if report.complete { try? database.advanceAnchor() }
        report.anchor = (try? database.anchor()) ?? 0
        return report
    }

    // MARK: State

    func setRow(_ row: ItemRecord, replacing old: ItemIdentifier?) {
        if let old, let previous = rows.removeValue(forKey: old), pathIndex[previous.localPath] == old {
            pathIndex[previous.localPath] = nil
        }
        if let previous = rows[row.identifier], pathIndex[previous.localPath] == row.identifier {
            pathIndex[previous.localPath] = nil
        }
        rows[row.identifier] = row
        pathIndex[row.localPath] = row.identifier
    }

    /// Saves `row` (in place of the row of `old`) and records its stable identifier, carried
    /// from `old`; `identity: false` for a row whose store identifier is about to be replaced
    /// (a child of a directory renamed on the remote, before its own rename is applied).
    func save(_ row: ItemRecord, replacing old: ItemIdentifier? = nil, identity: Bool = true) throws {
        try persist(row, replacing: old, identity: identity)
        setRow(row, replacing: old)
    }

    /// The database half of `save` (the pass's own maps are not touched).
    func persist(_ row: ItemRecord, replacing old: ItemIdentifier? = nil, identity: Bool = true) throws {
        try database.database.transaction {
            if let old, old != row.identifier { try database.remove(old) }
            try database.upsert(row)
            if identity {
                try database.recordIdentity(store: row.identifier, fileID: remote[row.identifier]?.fileID, movedFrom: old)
            }
        }
    }

    func forget(_ id: ItemIdentifier) throws {
        try database.remove(id)
        if let row = rows.removeValue(forKey: id), pathIndex[row.localPath] == id { pathIndex[row.localPath] = nil }
    }

    func loadRemote() throws {
        let items = try store.enumerateTree()
        remote = Dictionary(items.map { ($0.identifier, $0) }, uniquingKeysWith: { a, _ in a })
        remotePaths = ProviderBinding.localPaths(of: items)
        remoteMoves.merge(try database.reconcileIdentities(with: items)) { _, new in new }
    }

    func scanLocal(_ relative: String) {
        let names = tree.names(in: relative) { escaped in
            let path = relative.isEmpty ? escaped : relative + "/" + escaped
            report.errors.append(SyncIssue(path: path, error: MAMError.invalidArguments("the local name is not valid UTF-8; skipped")))
        }
        guard let names else { return }
        for name in names {
            if relative.isEmpty && name == ProviderLayout.metadataDirectoryName { continue }
            if FileSystem.isTemporaryName(name) { continue }
            let child = relative.isEmpty ? name : relative + "/" + name
            guard let st = tree.lstat(child), let type = FileSystem.itemType(st) else { continue }
            local[child] = LocalEntry(type: type, stamp: LocalStamp(st))
            if type == .directory { scanLocal(child) }
        }
    }

    func localEntry(_ relative: String) -> LocalEntry? {
        guard let st = tree.lstat(relative), let type = FileSystem.itemType(st) else { return nil }
        return LocalEntry(type: type, stamp: LocalStamp(st))
    }

    /// Moves the local map entries of `from` (and below it) to `to`.
    func moveLocalEntries(from: String, to: String) {
        for key in local.keys where ExactName.isSelfOrBelow(key, from) {
            local[to + ExactName.dropPrefix(key, from)] = local.removeValue(forKey: key)
        }
    }

    func tick(_ path: String) {
        counter.advance(path)
    }

    /// `tick` after a step, unless the step's fetch ticks when it is staged (`tickWhenStaged`).
    func tickUnlessStaging(_ path: String) {
        if tickWhenStaged {
            tickWhenStaged = false
        } else {
            tick(path)
        }
    }

    /// Content bytes the rest of the pass expects to move (once moves and renames are known,
    /// so a moved item is not counted): remote files new or changed since the last pass (their
    /// listed size), local files new or changed (their stat size).
    func expectedBytes() -> Int64 {
        var bytes: Int64 = 0
        for item in remote.values where item.type == .file {
            if rows[item.identifier]?.version.contentVersion != item.version.contentVersion { bytes += item.size }
        }
        for (path, entry) in local where entry.type == .file {
            if pathIndex[path].flatMap({ rows[$0] })?.local != entry.stamp { bytes += entry.stamp.size }
        }
        return bytes
    }

    /// Runs one item's step; problems are reported against `path`. An unreachable remote stops
    /// the pass; a refusal by policy is counted in `refused`.
    func attemptStep(_ path: String, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let stop as Stop {
            throw stop
        } catch let error as RemoteError {
            report.errors.append(SyncIssue(path: path, error: error))
            if case .unreachable = error { throw Stop() }
        } catch let error as MAMError {
            if case .policyDenied = error { report.refused += 1 }
            report.errors.append(SyncIssue(path: path, error: error))
        } catch {
            report.errors.append(SyncIssue(path: path, error: error))
        }
    }

    // MARK: Step 2: local moves

    /// - Returns: true when something was moved on the remote (the listing is then re-read).
    func pushLocalMoves() throws -> Bool {
        var byInode: [UInt64: String] = [:]
        for (path, entry) in local where pathIndex[path] == nil && entry.type != .symlink {
            byInode[entry.stamp.inode] = path
        }
        var candidates: [(inode: UInt64, to: String)] = []
        for row in rows.values where row.type != .symlink {
            guard local[row.localPath]?.type != row.type, remote[row.identifier] != nil,
                  let to = byInode[row.local.inode], let entry = local[to], entry.type == row.type else { continue }
            // A file keeps size and mtime when renamed; requiring them keeps a recycled inode
            // number from passing for a move (a moved-and-edited file is then deleted + created).
            if row.type == .file && (entry.stamp.size != row.local.size || entry.stamp.mtime != row.local.mtime) { continue }
            candidates.append((row.local.inode, to))
        }
        var moved = false
        for candidate in candidates.sorted(by: { FileSystem.depth($0.to) < FileSystem.depth($1.to) }) {
            guard let row = rows.values.first(where: { $0.local.inode == candidate.inode && $0.type == local[candidate.to]?.type }),
                  !ExactName.equal(row.localPath, candidate.to) else { continue }
            try attemptStep(candidate.to) {
                let parent = try remoteDirectory(forLocal: PathName.parent(of: candidate.to))
                let item = try store.move(row.identifier, toParent: parent, newName: FileSystem.lastComponent(candidate.to))
                var updated = row
                updated.identifier = item.identifier
                updated.parent = item.parentIdentifier
                updated.filename = item.filename
                updated.version.metadataVersion = item.version.metadataVersion
                updated.localPath = candidate.to
                try save(updated, replacing: row.identifier)
                if row.type == .directory {
                    try reidentifyDescendants(oldLocal: row.localPath, newLocal: candidate.to, directory: item.identifier)
                }
                report.movedRemotely += 1
                moved = true
            }
            tick(candidate.to)
        }
        return moved
    }

    /// After a directory moved on the remote, gives the rows below it their new identifiers
    /// (read from the remote) and local paths.
    func reidentifyDescendants(oldLocal: String, newLocal: String, directory: ItemIdentifier) throws {
        let subtree = try store.enumerateTree(from: directory)
        var relative: [ItemIdentifier: String] = [directory: ""]
        var byRelative = ExactDictionary<RemoteItem>()
        for item in subtree {
            guard let parent = relative[item.parentIdentifier] else { continue }
            let path = parent.isEmpty ? item.filename : parent + "/" + item.filename
            relative[item.identifier] = path
            byRelative[path] = item
        }
        for row in rows.values where ExactName.isBelow(row.localPath, oldLocal) {
            let suffix = ExactName.dropPrefix(row.localPath, oldLocal + "/")
            var updated = row
            updated.localPath = newLocal + "/" + suffix
            if let item = byRelative[suffix] {
                updated.identifier = item.identifier
                updated.parent = item.parentIdentifier
                updated.version.metadataVersion = item.version.metadataVersion
            }
            try save(updated, replacing: row.identifier)
        }
    }

    /// The remote identifier of a local directory: its row, or (for a directory not uploaded
    /// yet) a new remote directory, made with its missing parents.
    func remoteDirectory(forLocal relative: String) throws -> ItemIdentifier {
        if relative.isEmpty { return .rootContainer }
        if let id = pathIndex[relative], rows[id]?.type == .directory { return id }
        let parent = try remoteDirectory(forLocal: PathName.parent(of: relative))
        let name = FileSystem.lastComponent(relative)
        let item: RemoteItem
        do {
            item = try store.create(parent: parent, name: name, contents: .directory)
            report.created += 1
        } catch RemoteError.conflict(let existing, _) {
            item = try store.item(existing)
            guard item.type == .directory else { throw RemoteError.conflict(existing, current: item.version) }
        }
        let stamp = localEntry(relative)?.stamp ?? LocalStamp(inode: 0, size: 0, mtime: 0)
        try save(record(for: item, localPath: relative, stamp: stamp))
        return item.identifier
    }

    func record(for item: RemoteItem, localPath: String, stamp: LocalStamp) -> ItemRecord {
        ItemRecord(identifier: item.identifier, parent: item.parentIdentifier, filename: item.filename, type: item.type,
                   size: item.size, version: item.version, owner: owner, localPath: localPath, local: stamp)
    }

    // MARK: Step 3: remote renames

    /// Step 3: local items follow the remote items that moved. Moves the store's file ids show
    /// are taken first; the others are matched by type and contentVersion, and taken only when
    /// the contents show it too (`isMovedItem`).
    /// - Throws: `Stop` when the remote became unreachable (nothing local was deleted yet).
    func applyRemoteRenames() throws {
        let movedTo = remoteMoves.filter { rows[$0.key] != nil && remote[$0.key] == nil && rows[$0.value] == nil && remote[$0.value] != nil }
        let reserved = Set(movedTo.values)
        var appeared: [String: [RemoteItem]] = [:]
        for item in remote.values where rows[item.identifier] == nil && !reserved.contains(item.identifier) {
            appeared["\(item.type.rawValue)|\(item.version.contentVersion)", default: []].append(item)
        }
        guard !appeared.isEmpty || !movedTo.isEmpty else { return }
        let missing = rows.values.filter { remote[$0.identifier] == nil }
            .sorted { FileSystem.depth($0.localPath) < FileSystem.depth($1.localPath) }
        for original in missing {
            guard let row = rows[original.identifier] else { continue }
            let item: RemoteItem
            if let target = movedTo[row.identifier].flatMap({ remote[$0] }), target.type == row.type {
                item = target
            } else {
                let key = "\(row.type.rawValue)|\(row.version.contentVersion)"
                guard var options = appeared[key], !options.isEmpty else { continue }
                let index = options.firstIndex(where: { ExactName.equal($0.filename, row.filename) }) ?? 0
                guard try isMovedItem(row, options[index]) else { continue }
                item = options.remove(at: index)
                appeared[key] = options
            }
            guard let target = remotePaths[item.identifier] else { continue }
            if !ExactName.equal(row.localPath, target) {
                guard local[target] == nil else { continue }
                if let entry = local[row.localPath], entry.type == row.type {
                    do {
                        let parent = PathName.parent(of: target)
                        if !parent.isEmpty { try tree.makeDirectories(parent) }
                        guard tree.rename(row.localPath, target, flags: SystemConstants.renameNoReplace) == 0 else {
                            throw MAMError.fromErrno("rename \(row.localPath) to \(target)")
                        }
                    } catch {
                        report.errors.append(SyncIssue(path: row.localPath, error: error))
                        continue
                    }
                    moveLocalEntries(from: row.localPath, to: target)
                    report.movedLocally += 1
                }
            }
            var updated = row
            updated.identifier = item.identifier
            updated.parent = item.parentIdentifier
            updated.filename = item.filename
            updated.version.metadataVersion = item.version.metadataVersion
            updated.localPath = target
            do {
                try save(updated, replacing: row.identifier)
                if row.type == .directory && !ExactName.equal(row.localPath, target) {
                    for child in rows.values where ExactName.isBelow(child.localPath, row.localPath) {
                        var moved = child
                        moved.localPath = target + ExactName.dropPrefix(child.localPath, row.localPath)
                        try save(moved, identity: remote[child.identifier] != nil)
                    }
                }
            } catch {
                report.errors.append(SyncIssue(path: target, error: error))
            }
            tick(target)
        }
    }

    /// Whether `candidate`, a new remote item with the contentVersion of the vanished `row` and
    /// no file id tying the two, is `row`'s item moved. An entity tag made of size and mtime is
    /// shared by other files, so the contentVersion alone is no proof: a directory is taken (its
    /// children are matched one by one), a symlink when it points where the local one does, a
    /// file when the local file is still what was last synced and its bytes equal the
    /// candidate's download (`ContentMatch`). A local item changed or deleted since cannot show
    /// it and is not taken for a rename: the remote delete and the new item are then handled as
    /// such, which keeps the local changes.
    /// - Throws: `Stop` when the download finds the remote unreachable; other download errors
    ///   are reported and the candidate not taken.
    func isMovedItem(_ row: ItemRecord, _ candidate: RemoteItem) throws -> Bool {
        switch row.type {
        case .directory:
            return true
        case .symlink:
            guard let entry = local[row.localPath], entry.type == .symlink, entry.stamp == row.local,
                  let target = tree.readLink(row.localPath) else { return false }
            return ExactName.equal(target, candidate.symlinkTarget ?? "")
        case .file:
            guard let entry = local[row.localPath], entry.type == .file, entry.stamp == row.local else { return false }
            do {
                return try ContentMatch.remoteItem(candidate, store: store, equalsLocal: row.localPath, in: tree,
                                                   context: binding.context)
            } catch RemoteError.notFound {
                return false
            } catch {
                report.errors.append(SyncIssue(path: remotePaths[candidate.identifier] ?? row.localPath, error: error))
                if case RemoteError.unreachable = error {
                    remoteUnreachable = true
                    throw Stop()
                }
                return false
            }
        }
    }

    // MARK: Step 4: known items

    func reconcileKnownItems() throws {
        let ordered = rows.values.map { ($0.identifier, FileSystem.depth($0.localPath)) }.sorted { $0.1 > $1.1 }.map(\.0)
        for id in ordered {
            guard let row = rows[id] else { continue }
            try attemptStep(row.localPath) { try reconcile(row) }
            tickUnlessStaging(row.localPath)
        }
    }

    func reconcile(_ row: ItemRecord) throws {
        let entry = local[row.localPath].flatMap { $0.type == row.type ? $0 : nil }
        let item = remote[row.identifier].flatMap { $0.type == row.type ? $0 : nil }
        let localChanged = row.type != .directory && entry.map { $0.stamp != row.local } ?? false
        let remoteChanged = row.type != .directory && item.map { $0.version.contentVersion != row.version.contentVersion } ?? false
        switch (entry, item) {
        case (.some, .some(let item)):
            switch (localChanged, remoteChanged) {
            case (false, false):
                if item.version.metadataVersion != row.version.metadataVersion {
                    var updated = row
                    updated.version.metadataVersion = item.version.metadataVersion
                    try save(updated)
                }
            case (false, true):
                try fetchContents(item, into: row.localPath, expecting: row.local, replacing: row.identifier)
            case (true, false):
                try modifyItem(row, remote: item)
            case (true, true):
                try keepBoth(row, remote: item)
            }
        case (.some, .none):
            if localChanged {
                // Deleted remotely, changed locally: the local changes are kept and uploaded anew.
                try forget(row.identifier)
                try createItem(localPath: row.localPath)
            } else {
                try deleteLocally(row)
            }
        case (.none, .some(let item)):
            if remoteChanged {
                // Deleted locally, changed remotely: the remote changes win; step 5 fetches it again.
                try forget(row.identifier)
            } else {
                try deleteItem(row, remote: item)
            }
        case (.none, .none):
            try forget(row.identifier)
        }
    }

    func deleteLocally(_ row: ItemRecord) throws {
        if row.type == .directory {
            if tree.rmdir(row.localPath) != 0 {
                // Not empty: holds local items the remote does not have; they are uploaded anew.
                try forget(row.identifier)
                return
            }
        } else {
            guard let now = localEntry(row.localPath), now.stamp == row.local else {
                throw MAMError.system("\(row.localPath) changed during the sync; kept", errno: EAGAIN)
            }
            guard tree.unlink(row.localPath) == 0 else { throw MAMError.fromErrno("remove \(row.localPath)") }
        }
        local[row.localPath] = nil
        try forget(row.identifier)
        report.deletedLocally += 1
    }

    /// Mirrors `deleteItemWithIdentifier:baseVersion:`: deletes the remote item if it is still
    /// at the version the replica had; otherwise the remote wins and the item is fetched again.
    func deleteItem(_ row: ItemRecord, remote item: RemoteItem) throws {
        do {
            try store.delete(row.identifier, baseVersion: row.type == .directory ? nil : row.version.contentVersion)
            remote[row.identifier] = nil
            try forget(row.identifier)
            report.deletedRemotely += 1
        } catch RemoteError.conflict {
            // Changed remotely, or a directory that gained items: keep the remote; step 5 fetches it.
            try forget(row.identifier)
        }
    }

    // MARK: Steps 5 and 6: new items

    func fetchNewRemoteItems() throws {
        let fresh = remote.values.compactMap { item -> (item: RemoteItem, relative: String, depth: Int)? in
            guard rows[item.identifier] == nil, let relative = remotePaths[item.identifier] else { return nil }
            return (item, relative, FileSystem.depth(relative))
        }.sorted { $0.depth < $1.depth }
        for (item, relative, _) in fresh {
            try attemptStep(relative) {
                if pathIndex[relative] == nil, let existing = local[relative] {
                    if existing.type == .directory && item.type == .directory {
                        try save(record(for: item, localPath: relative, stamp: existing.stamp))
                        return
                    }
                    // The same item (a copy a killed pass put in place before recording it):
                    // recorded as it is.
                    let adoption = try adoptIfIdentical(item, at: relative, existing: existing)
                    guard case .different(let download) = adoption else { return }
                    // A new local item with the same name: kept under a conflict name, uploaded in step 6.
                    let parent = PathName.parent(of: relative)
                    let name = ConflictName.make(for: item.filename) { candidate in
                        let path = parent.isEmpty ? candidate : parent + "/" + candidate
                        return local[path] != nil || localEntry(path) != nil || remotePaths.values.contains(path)
                    }
                    let conflictRelative = parent.isEmpty ? name : parent + "/" + name
                    guard tree.rename(relative, conflictRelative, flags: SystemConstants.renameNoReplace) == 0 else {
                        throw MAMError.fromErrno("rename \(relative) to its conflict name")
                    }
                    moveLocalEntries(from: relative, to: conflictRelative)
                    report.conflicts += 1
                    try fetchContents(item, into: relative, expecting: nil, download: download)
                    return
                }
                try fetchContents(item, into: relative, expecting: nil)
            }
            tickUnlessStaging(relative)
        }
    }

    func uploadNewLocalItems() throws {
        let fresh = local.keys.filter { pathIndex[$0] == nil }.sorted { FileSystem.depth($0) < FileSystem.depth($1) }
        for relative in fresh where pathIndex[relative] == nil {
            let parent = PathName.parent(of: relative)
            if !parent.isEmpty && pathIndex[parent] == nil { continue }
            try attemptStep(relative) { try createItem(localPath: relative) }
            tick(relative)
        }
    }
}
