import Foundation
import MAMSystem
import MAMProtection

/// The placeholder side of `NonReplicatedProvider`: the local root made to show the remote
/// tree, every local operation confined to the root (`ConfinedDirectory`).
extension NonReplicatedProvider {
    // MARK: Placeholders

    /// Makes the local root show the remote tree: missing directories created, missing files
    /// as placeholders, placeholders of changed items refreshed, clean materialized copies of
    /// changed items turned back into placeholders (fresh contents on next open), items gone
    /// from the remote removed locally unless they hold un-uploaded changes (those lose their
    /// item attributes and are uploaded as new items by the next `itemChanged`). An item renamed
    /// or moved on the remote is moved locally first, keeping its contents, its pending changes
    /// and its stable identifier (`applyRemoteMoves`).
    ///
    /// Enumerates under the domain's account (`FileProviderDomain.enumerator(for:)`).
    /// - Parameter progress: called after each item.
    /// - Returns: the report; an unreachable remote is an error in it (`complete == false`) and
    ///   nothing local is touched.
    /// - Throws: only local failures that stop the whole pass (`.cannotCreateOutput`).
    @discardableResult
    public func createPlaceholders(progress: ((SyncProgress) -> Void)? = nil) throws -> SyncReport {
        try createPlaceholders(counter: SyncProgressCounter(progress))
    }

    /// `createPlaceholders` counting into `counter` (items: every remote item; no content
    /// bytes move).
    func createPlaceholders(counter: SyncProgressCounter) throws -> SyncReport {
        var report = SyncReport()
        let items: [FileProviderItem]
        let remoteItems: [RemoteItem]
        do {
            try binding.checkBeforePass()
            remoteItems = try binding.remote.enumerateTree()
            let enumerator = domain.enumerator(for: .rootContainer)
            items = remoteItems.map(enumerator.domain.protectFileProviderItem)
        } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            report.complete = false
            return report
        }
        let paths = ProviderBinding.localPaths(of: remoteItems)
        let tree: ConfinedDirectory
        do {
            tree = try self.tree()
            if remoteItems.isEmpty {
                // Items of the remote at the top of the local tree, which an emptied collection
                // would remove (`ProviderBinding.checkRemoteNotEmptied`).
                let known = itemEntries(in: "", tree: tree)?.filter {
                    tree.getAttribute($0.path, LocalItemAttributes.itemAttribute) != nil
                }.count ?? 0
                try binding.checkRemoteNotEmptied(knownLocalItems: known)
            }
        } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            report.complete = false
            return report
        }
        applyRemoteMoves(remoteItems, paths: paths, tree: tree, report: &report)
        let byId = Dictionary(remoteItems.map { ($0.identifier, $0) }, uniquingKeysWith: { a, _ in a })
        var seen = Set<ItemIdentifier>()
        counter.expect(items: items.filter { paths[$0.itemIdentifier] != nil }.count)
        for item in items {
            guard let relative = paths[item.itemIdentifier], let remote = byId[item.itemIdentifier] else { continue }
            seen.insert(item.itemIdentifier)
            do {
                try placeItem(remote, relative: relative, tree: tree, report: &report)
            } catch {
                report.errors.append(SyncIssue(path: relative, error: error))
            }
            counter.advance(relative)
        }
        removeVanished(directory: "", remoteIds: seen, tree: tree, report: &report)
        report.anchor = (try? binding.database.anchor()) ?? 0
        return report
    }

    private func placeItem(_ item: RemoteItem, relative: String, tree: ConfinedDirectory, report: inout SyncReport) throws {
        let st = tree.lstat(relative)
        if st == nil && errno != ENOENT {
            // A parent that is a symlink or not a directory: nothing is made through it.
            throw MAMError.fromErrno("\(relative)")
        }
        switch item.type {
        case .directory:
            if st == nil {
                guard tree.mkdir(relative, 0o755) == 0 else { throw MAMError.fromErrno("mkdir \(relative)") }
                report.fetched += 1
            } else if let st, !FileSystem.isDirectory(st) {
                throw MAMError.cannotCreateOutput("\(relative) exists locally and is not a directory")
            }
            try tree.setAttribute(relative, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
        case .symlink:
            let target = item.symlinkTarget ?? ""
            if let st {
                guard FileSystem.isSymlink(st), tree.readLink(relative) != target else { return }
                _ = tree.unlink(relative)
            }
            guard tree.symlink(target, relative) == 0 else { throw MAMError.fromErrno("symlink \(relative)") }
            report.fetched += 1
        case .file:
            guard let st else {
                try writePlaceholder(for: item, at: relative, in: tree, replacing: false)
                report.placeholders += 1
                return
            }
            guard FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(relative, in: tree),
                  attributes.identifier == item.identifier else {
                // A local file not uploaded yet under the same name: it is uploaded (and the
                // clash resolved) by its own itemChanged.
                return
            }
            guard attributes.contentVersion != item.version.contentVersion else { return }
            if attributes.isPlaceholder || !attributes.hasLocalChanges(st) {
                try writePlaceholder(for: item, at: relative, in: tree, replacing: true)
                report.placeholders += 1
            }
        }
    }

    /// Removes local items whose remote item is gone (keeping those with local changes).
    private func removeVanished(directory relative: String, remoteIds: Set<ItemIdentifier>, tree: ConfinedDirectory,
                                report: inout SyncReport) {
        guard let entries = itemEntries(in: relative, tree: tree) else { return }
        for (child, st) in entries {
            if FileSystem.isDirectory(st) {
                removeVanished(directory: child, remoteIds: remoteIds, tree: tree, report: &report)
                if let id = tree.getAttribute(child, LocalItemAttributes.itemAttribute), !remoteIds.contains(ItemIdentifier(id)) {
                    if tree.rmdir(child) == 0 { report.deletedLocally += 1 } else { LocalItemAttributes.clear(child, in: tree) }
                }
            } else if FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(child, in: tree),
                      !remoteIds.contains(attributes.identifier) {
                try? binding.database.remove(attributes.identifier)
                if attributes.hasLocalChanges(st) {
                    LocalItemAttributes.clear(child, in: tree)
                } else if tree.unlink(child) == 0 {
                    report.deletedLocally += 1
                }
            }
        }
    }

    /// Writes an empty placeholder file for `item` at `relative` (atomically; `replacing` an
    /// existing file or refusing to clobber one).
    func writePlaceholder(for item: RemoteItem, at relative: String, in tree: ConfinedDirectory, replacing: Bool) throws {
        let temp = try layout.makeTemporaryFile(name: item.filename)
        let opened = try FileSystem.openFile(temp.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        let fd = opened.rawValue
        let attributes = LocalItemAttributes(identifier: item.identifier, contentVersion: item.version.contentVersion,
                                             size: item.size, isPlaceholder: true, stamp: nil)
        try attributes.write(fd: fd)
        fchmod(fd, mode_t(item.mode ?? 0o644) & 0o777)
        remember(item, relative: relative)
        try temp.move(to: relative, in: tree, noReplace: !replacing)
    }
}
