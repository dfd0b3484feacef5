import COpenSSL
import Foundation
import MAMProtection
import MAMSystem

/// The contents of one replicated sync pass: downloads into the replica, uploads of plain
/// copies, and the conflict copies (`keepBoth`).
extension ReplicatedSyncPass {
    // MARK: Contents

    /// Mirrors `fetchContentsForItemWithIdentifier:version:`: downloads the item (a file into
    /// memory), makes the provided copy in a temp file (`ProviderRules.writeProvidedCopy`:
    /// encrypted for the domain's account exactly when its policy says
    /// `shouldFileProviderEncryptFiles`) and stages it in the pass's batch, which moves it into
    /// the replica at `relative` and records it (`Placement`, in place of the row of
    /// `replacing`) once it is durable (`commitFetched`) — only while the local item is still
    /// what was last synced (`expecting`), or absent (`expecting == nil`: the rename never
    /// replaces anything). A directory is made by the batch too, before what goes into it. A
    /// file is downloaded and encrypted beside the pass, with others (`submitFetches`, `fetch`);
    /// its failure is reported against `relative` when the pass collects it (`stage`).
    ///
    /// - Parameter download: the item's plain bytes when the caller has fetched them already
    ///   (`adoptIfIdentical`), with the version they are of.
    func fetchContents(_ item: RemoteItem, into relative: String, expecting: LocalStamp?,
                       replacing: ItemIdentifier? = nil, download: (bytes: PlainBuffer, item: RemoteItem)? = nil) throws {
        if let expecting {
            guard localEntry(relative)?.stamp == expecting else {
                throw MAMError.system("\(relative) changed during the sync; retried next pass", errno: EAGAIN)
            }
        }
        switch item.type {
        case .directory:
            batch.add(.init(relative: relative, source: .directory(mode_t(item.mode ?? 0o755) & 0o777 | 0o700), expecting: nil,
                            payload: Placement(item: item, replacing: replacing)))
        case .symlink:
            let link = try layout.makeTemporaryFile(name: item.filename)
            unlink(link.path)
            guard tree.symlink(item.symlinkTarget ?? "", link.relative) == 0 else { throw MAMError.fromErrno("symlink \(relative)") }
            batch.add(.init(relative: relative, source: .copy(link), expecting: expecting,
                            stamp: FileSystem.lstatPath(link.path).map(LocalStamp.init),
                            payload: Placement(item: item, replacing: replacing)))
        case .file:
            // Staging the copy (or its failure) counts the item as handled.
            tickWhenStaged = true
            let placement = Placement(item: item, replacing: replacing)
            if let download {
                stage(FetchedCopy(relative: relative, expecting: expecting, placement: placement, result: Result {
                    try Self.makeCopy(of: download.item, from: download.bytes, layout: layout, owner: owner, context: binding.context)
                }))
            } else if item.size > Self.concurrentFetchSize {
                // Alone, on the pass's thread: one large download in memory at a time.
                submitFetches()
                for copy in fetches.finish().joined() { stage(copy) }
                let request = FetchRequest(item: item, relative: relative, expecting: expecting, placement: placement)
                stage(Self.fetch([request], store: store, layout: layout, owner: owner, context: binding.context)[0])
            } else {
                pendingFetches.append(FetchRequest(item: item, relative: relative, expecting: expecting, placement: placement))
                pendingFetchBytes += item.size
                if pendingFetches.count >= Self.fetchGroupItems || pendingFetchBytes >= Self.fetchGroupBytes { submitFetches() }
                for copy in fetches.take().joined() { stage(copy) }
            }
            if remoteUnreachable { throw Stop() }
        }
        if batch.isFull { commitStaged() }
    }

    /// A file to fetch beside the pass, waiting in `pendingFetches` for a group to be full.
    struct FetchRequest: Sendable {
        let item: RemoteItem
        let relative: String
        let expecting: LocalStamp?
        let placement: Placement
    }

    /// Files handed to a worker at once (one job, one in-memory download buffer used in turn):
    /// fewer thread hand-offs than a job per file.
    static let fetchGroupItems = 32
    static let fetchGroupBytes: Int64 = 4 << 20

    /// Hands the waiting fetches to a worker as one job.
    func submitFetches() {
        guard !pendingFetches.isEmpty else { return }
        let group = pendingFetches
        pendingFetches = []
        pendingFetchBytes = 0
        let store = store, layout = layout, owner = owner, context = binding.context
        fetches.submit { Self.fetch(group, store: store, layout: layout, owner: owner, context: context) }
    }

    /// Downloads the files of `group` one after another into one in-memory buffer (emptied
    /// before each) and makes their provided copies; the store is told of the whole group first
    /// (`prefetchContents`). Once the remote is unreachable the rest fail the same way without
    /// being tried. Runs on any thread.
    static func fetch(_ group: [FetchRequest], store: any RemoteStore, layout: ProviderLayout, owner: String,
                      context: ProtectionContext) -> [FetchedCopy] {
        var buffer: PlainBuffer?
        var unreachable: (any Error)?
        if group.count > 1 { store.prefetchContents(of: group.map(\.item.identifier)) }
        return group.map { request in
            FetchedCopy(relative: request.relative, expecting: request.expecting, placement: request.placement, result: Result {
                if let unreachable { throw unreachable }
                do {
                    let plain = try buffer ?? PlainBuffer(name: "mamfs-download")
                    buffer = plain
                    guard ftruncate(plain.fd, 0) == 0 else { throw MAMError.fromErrno("empty the download buffer") }
                    let fetched = try store.readContents(of: request.item.identifier, into: plain.url)
                    return try makeCopy(of: fetched, from: plain, layout: layout, owner: owner, context: context)
                } catch RemoteError.unreachable(let why) {
                    unreachable = RemoteError.unreachable(why)
                    throw RemoteError.unreachable(why)
                }
            })
        }
    }

    /// Files up to this size are fetched several at once (each download is held in memory
    /// until it is encrypted to disk); larger ones one at a time.
    static let concurrentFetchSize: Int64 = 16 << 20

    /// A file's provided copy, made beside the pass (`fetches`), on its way into the batch.
    struct FetchedCopy: @unchecked Sendable {
        // Unchecked: the temp file goes from the worker that made it to the pass, once.
        let relative: String
        let expecting: LocalStamp?
        let placement: Placement
        let result: Result<ProvidedCopy, any Error>
    }

    /// A finished provided copy in the temp area.
    struct ProvidedCopy {
        let temp: TemporaryFile
        /// Its stamp (what the replica's file has once renamed in).
        let stamp: LocalStamp
        /// The remote item at the version downloaded.
        let item: RemoteItem
        /// Plain bytes downloaded.
        let bytes: Int64
    }

    /// Makes the provided copy of the plain bytes `plain` of `item` in a new temp file (the
    /// remote's mode, owner's encryption: `ProviderRules.writeProvidedCopy`), not synced. Runs
    /// on any thread.
    static func makeCopy(of item: RemoteItem, from plain: PlainBuffer, layout: ProviderLayout, owner: String,
                         context: ProtectionContext) throws -> ProvidedCopy {
        let mode = mode_t(item.mode ?? 0o644) & 0o777
        var st = stat()
        let temp = try layout.makeTemporaryFile(name: item.filename) { fd in
            try ProviderRules.writeProvidedCopy(plain: plain, owner: owner, into: fd, context: context)
            fchmod(fd, mode)
            guard fstat(fd, &st) == 0 else { throw MAMError.fromErrno("stat the provided copy of \(item.filename)") }
        }
        return ProvidedCopy(temp: temp, stamp: LocalStamp(st), item: item, bytes: plain.byteCount)
    }

    /// Puts a finished fetch into the batch, or reports why it failed (an unreachable remote
    /// once, and the pass then stops: `remoteUnreachable`), and counts its item as handled.
    func stage(_ fetched: FetchedCopy) {
        defer { tick(fetched.relative) }
        switch fetched.result {
        case .success(let copy):
            counter.transferred(copy.bytes, estimated: fetched.placement.item.size)
            var placement = fetched.placement
            placement.item = copy.item
            batch.add(.init(relative: fetched.relative, source: .copy(copy.temp), expecting: fetched.expecting, stamp: copy.stamp,
                            payload: placement), bytes: copy.bytes)
        case .failure(let error):
            if case RemoteError.unreachable = error {
                if remoteUnreachable { return }
                remoteUnreachable = true
            }
            if case MAMError.policyDenied = error { report.refused += 1 }
            report.errors.append(SyncIssue(path: fetched.relative, error: error))
        }
        if batch.isFull { commitStaged() }
    }

    /// Waits for the fetches in flight, then commits the batch (`commitStaged`): at the end of
    /// a step, and when the pass stops.
    func commitFetched() {
        submitFetches()
        for copy in fetches.finish().joined() { stage(copy) }
        commitStaged()
    }

    /// Puts the batch's items in place durably (`ProvidedCopyBatch.commit`: syncfs, renames,
    /// syncfs) and records the ones in place, in one transaction; fetches still running go into
    /// the next batch. An item that could not be placed is reported against its path and left
    /// for the next pass (its temp file removed, nothing recorded).
    func commitStaged() {
        guard !batch.isEmpty else { return }
        let results = batch.commit(in: tree) { try durability.sync(syncDescriptor, root: layout.root) }
        var placed: [(row: ItemRecord, replacing: ItemIdentifier?, entry: LocalEntry)] = []
        do {
            try database.database.transaction {
                for (entry, outcome) in results {
                    do {
                        if case .failed(let error) = outcome { throw error }
                        let now: LocalEntry
                        if let stamp = entry.stamp {
                            now = LocalEntry(type: entry.payload.item.type, stamp: stamp)
                        } else {
                            guard let found = localEntry(entry.relative) else { throw MAMError.fileNotFound(entry.relative) }
                            now = found
                        }
                        let row = record(for: entry.payload.item, localPath: entry.relative, stamp: now.stamp)
                        try persist(row, replacing: entry.payload.replacing)
                        placed.append((row, entry.payload.replacing, now))
                    } catch {
                        report.errors.append(SyncIssue(path: entry.relative, error: error))
                    }
                }
            }
        } catch {
            // Nothing of the batch was recorded; the next pass finds the copies in place.
            for item in placed { report.errors.append(SyncIssue(path: item.row.localPath, error: error)) }
            return
        }
        for item in placed {
            setRow(item.row, replacing: item.replacing)
            local[item.row.localPath] = item.entry
            report.fetched += 1
        }
    }

    /// What `adoptIfIdentical` found.
    enum Adoption {
        /// The local item is the remote item: staged to be recorded as it is.
        case adopted
        /// It is not; the remote bytes, when they had to be read to tell, for `fetchContents`.
        case different(download: (bytes: PlainBuffer, item: RemoteItem)?)
    }

    /// A local item that has no record at `relative` (or a record older than it) while the
    /// remote item there is new or changed: when the two are the same, the local item is
    /// recorded as synced (after the batch's sync, like a fetched one) instead of being kept as
    /// a conflict copy. That is what a pass killed between putting a batch in place and
    /// recording it leaves (`ProvidedCopyBatch`). The same: a symlink with the same target
    /// bytes; a file provided for the domain's account the way the pass provides it (encrypted
    /// exactly when `shouldEncryptProvidedCopy` says so) whose plaintext is the remote's bytes
    /// (compared only when the sizes match).
    func adoptIfIdentical(_ item: RemoteItem, at relative: String, existing: LocalEntry,
                          replacing: ItemIdentifier? = nil) throws -> Adoption {
        guard existing.type == item.type else { return .different(download: nil) }
        var fetched = item
        var download: (bytes: PlainBuffer, item: RemoteItem)?
        switch item.type {
        case .directory:
            break
        case .symlink:
            guard let target = tree.readLink(relative), ExactName.equal(target, item.symlinkTarget ?? "") else {
                return .different(download: nil)
            }
        case .file:
            let fd = tree.openExisting(relative, O_RDONLY)
            guard fd >= 0 else { return .different(download: nil) }
            let file = FileDescriptor(adopting: fd)
            guard let header = try? ProtectedFileHeader.read(fd: file.rawValue),
                  AccountIdentity.canonical(header.owner) == AccountIdentity.canonical(owner),
                  header.isEncrypted == ProviderRules.shouldEncryptProvidedCopy(owner: owner, context: binding.context),
                  let content = try? binding.context.openContent(fd: file.rawValue),
                  let size = try? content.plaintextSize(), size == item.size else {
                return .different(download: nil)
            }
            let plain = try PlainBuffer(name: "mamfs-download")
            fetched = try store.readContents(of: item.identifier, into: plain.url)
            counter.transferred(plain.byteCount, estimated: item.size)
            download = (plain, fetched)
            guard (try? ContentMatch.plaintext(content, size: size, equals: plain)) == true else { return .different(download: download) }
        }
        guard localEntry(relative)?.stamp == existing.stamp else { return .different(download: download) }
        batch.add(.init(relative: relative, source: .inPlace, expecting: existing.stamp, stamp: existing.stamp,
                        payload: Placement(item: fetched, replacing: replacing)))
        if batch.isFull { commitStaged() }
        return .adopted
    }

    /// The plain bytes of a local file for upload (receive check + decryption to a copy), with
    /// the local stat taken just before the copy so later changes are seen as changes.
    func plainContents(_ relative: String) throws -> (copy: PlainBuffer, stamp: LocalStamp) {
        guard let before = localEntry(relative) else { throw MAMError.fileNotFound(relative) }
        let (copy, _) = try ProviderRules.plainCopyForUpload(relative: relative, in: tree, receiver: owner,
                                                             context: binding.context)
        return (copy, before.stamp)
    }

    /// Mirrors `modifyItem:baseVersion:changedFields:contents:` for changed contents: the plain
    /// copy replaces the remote contents if the remote is still at the replica's base version.
    func modifyItem(_ row: ItemRecord, remote item: RemoteItem) throws {
        var updated = row
        if row.type == .symlink {
            guard let target = tree.readLink(row.localPath), let entry = localEntry(row.localPath) else { return }
            try store.delete(row.identifier, baseVersion: row.version.contentVersion)
            let created = try store.create(parent: row.parent, name: row.filename, contents: .symlink(target))
            updated = record(for: created, localPath: row.localPath, stamp: entry.stamp)
            try save(updated, replacing: row.identifier)
            report.modified += 1
            return
        }
        let (copy, stamp) = try plainContents(row.localPath)
        do {
            let result = try store.modify(row.identifier, baseVersion: row.version.contentVersion, contentsURL: copy.url)
            counter.transferred(copy.byteCount, estimated: stamp.size)
            updated = record(for: result, localPath: row.localPath, stamp: stamp)
            try save(updated, replacing: row.identifier)
            report.modified += 1
        } catch RemoteError.conflict {
            guard let latest = try? store.item(row.identifier) else { throw RemoteError.notFound(row.identifier) }
            try keepBoth(row, remote: latest)
        }
    }

    /// Both sides changed: the local file is renamed to `name (conflict HOST DATE).ext` (and
    /// uploaded as a new item in step 6), the remote version is fetched under the original name.
    /// A local file identical to the remote version is no conflict: it is recorded as synced
    /// (`adoptIfIdentical`).
    func keepBoth(_ row: ItemRecord, remote item: RemoteItem) throws {
        var download: (bytes: PlainBuffer, item: RemoteItem)?
        if let entry = localEntry(row.localPath) {
            switch try adoptIfIdentical(item, at: row.localPath, existing: entry, replacing: row.identifier) {
            case .adopted: return
            case .different(let fetched): download = fetched
            }
        }
        let parent = PathName.parent(of: row.localPath)
        let remoteSiblings = Set(remotePaths.values.filter { PathName.parent(of: $0) == parent }.map(FileSystem.lastComponent))
        let name = ConflictName.make(for: row.filename) { candidate in
            let relative = parent.isEmpty ? candidate : parent + "/" + candidate
            return remoteSiblings.contains(candidate) || local[relative] != nil || localEntry(relative) != nil
        }
        let conflictRelative = parent.isEmpty ? name : parent + "/" + name
        guard tree.rename(row.localPath, conflictRelative, flags: SystemConstants.renameNoReplace) == 0 else {
            throw MAMError.fromErrno("rename \(row.localPath) to its conflict name")
        }
        moveLocalEntries(from: row.localPath, to: conflictRelative)
        report.conflicts += 1
        try fetchContents(item, into: row.localPath, expecting: nil, replacing: row.identifier, download: download)
    }

    /// Mirrors `createItemBasedOnTemplate:fields:contents:`: a new local item goes up as a new
    /// remote item; a file as its plain copy (receive check + decryption first).
    func createItem(localPath relative: String) throws {
        guard let entry = localEntry(relative) else { return }
        let parent = try remoteDirectory(forLocal: PathName.parent(of: relative))
        let name = FileSystem.lastComponent(relative)
        let item: RemoteItem
        var stamp = entry.stamp
        switch entry.type {
        case .directory:
            _ = try remoteDirectory(forLocal: relative)
            return
        case .symlink:
            item = try store.create(parent: parent, name: name, contents: .symlink(tree.readLink(relative) ?? ""))
        case .file:
            let (copy, before) = try plainContents(relative)
            stamp = before
            item = try store.create(parent: parent, name: name, contents: .file(copy.url))
            counter.transferred(copy.byteCount, estimated: before.size)
        }
        try save(record(for: item, localPath: relative, stamp: stamp))
        report.created += 1
    }
}
