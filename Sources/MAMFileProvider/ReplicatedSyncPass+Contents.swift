import Foundation
import MAMProtection
import MAMSystem

/// The contents of one replicated sync pass: downloads into the replica, uploads of plain
/// copies, and the conflict copies (`keepBoth`).
extension ReplicatedSyncPass {
    // MARK: Contents

    /// Mirrors `fetchContentsForItemWithIdentifier:version:`: downloads the item into a temp
    /// file, makes the provided copy (`ProviderRules.writeProvidedCopy`: encrypted for the
    /// domain's account exactly when its policy says `shouldFileProviderEncryptFiles`) and
    /// moves it into the replica at `relative` atomically — only while the local file is still
    /// what was last synced (`expecting`), or absent (`expecting == nil`).
    func fetchContents(_ item: RemoteItem, into relative: String, expecting: LocalStamp?) throws -> ItemRecord {
        let current = localEntry(relative)
        if let expecting {
            guard current?.stamp == expecting else {
                throw MAMError.system("\(relative) changed during the sync; retried next pass", errno: EAGAIN)
            }
        } else if current != nil {
            throw MAMError.cannotCreateOutput("\(relative) appeared during the sync; retried next pass")
        }
        var fetched = item
        switch item.type {
        case .directory:
            guard tree.mkdir(relative, mode_t(item.mode ?? 0o755) & 0o777 | 0o700) == 0 else { throw MAMError.fromErrno("mkdir \(relative)") }
        case .symlink:
            let temp = try layout.makeTemporaryFile(name: item.filename)
            unlink(temp.path)
            guard tree.symlink(item.symlinkTarget ?? "", temp.relative) == 0 else { throw MAMError.fromErrno("symlink \(relative)") }
            try temp.move(to: relative, in: tree)
        case .file:
            // The plain download stays in memory; only the provided copy (encrypted as it is
            // written when the policy says so) goes to the replica's disk.
            let temp = try layout.makeTemporaryFile(name: item.filename)
            let download = try PlainBuffer(name: "mamfs-download")
            fetched = try store.readContents(of: item.identifier, into: download.url)
            counter.transferred(download.byteCount, estimated: item.size)
            try ProviderRules.writeProvidedCopy(plain: download, owner: owner, destination: temp.path,
                                                context: binding.context)
            chmod(temp.path, mode_t(fetched.mode ?? 0o644) & 0o777)
            if let expecting {
                guard localEntry(relative)?.stamp == expecting else {
                    throw MAMError.system("\(relative) changed during the sync; retried next pass", errno: EAGAIN)
                }
                try temp.move(to: relative, in: tree)
            } else {
                try temp.move(to: relative, in: tree, noReplace: true)
            }
        }
        guard let entry = localEntry(relative) else { throw MAMError.fileNotFound(relative) }
        local[relative] = entry
        return record(for: fetched, localPath: relative, stamp: entry.stamp)
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
    func keepBoth(_ row: ItemRecord, remote item: RemoteItem) throws {
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
        try save(try fetchContents(item, into: row.localPath, expecting: nil), replacing: row.identifier)
        report.fetched += 1
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
