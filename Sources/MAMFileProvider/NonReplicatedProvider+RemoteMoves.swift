import Foundation
import MAMSystem
import MAMProtection

/// Remote renames and moves followed locally by the non-replicated provider: a local item
/// whose remote item moved is renamed to the item's new place (contents, placeholder state,
/// owner and pending changes go with it) and keeps its stable identifier, instead of being
/// removed and made again.
extension NonReplicatedProvider {
    /// Finds the items of `remoteItems` (a listing of the whole store) that moved since the
    /// local tree was made, and moves their local items there (`paths`: the local path of
    /// each remote item, from `ProviderBinding.localPaths`).
    ///
    /// A move is known from the store's `fileID` (`ProviderDatabase.reconcileIdentities`), or,
    /// for a file whose store has no file ids, from a local item whose remote item is gone and
    /// a new remote file with its contentVersion whose contents show it is the same file
    /// (`isMovedFile`; directories of such a store are not matched: a renamed one is made anew,
    /// its files moved into it, and the old one removed). Moves are applied shallowest first, a
    /// moved directory taking its local children along. A move whose new place is taken locally
    /// (by another item or a file not uploaded yet) is not made: the old item is then removed
    /// or kept as for a remote delete. Every local step is confined to the root.
    /// - Returns: nothing; counts go to `report.movedLocally`, problems to `report.errors`.
    func applyRemoteMoves(_ remoteItems: [RemoteItem], paths: [ItemIdentifier: String], tree: ConfinedDirectory,
                          report: inout SyncReport) {
        var moves: [ItemIdentifier: ItemIdentifier]
        do { moves = try binding.database.reconcileIdentities(with: remoteItems) } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            return
        }
        var local: [ItemIdentifier: String] = [:]
        var versions: [ItemIdentifier: String] = [:]
        scanItems("", tree: tree, into: &local, versions: &versions)
        let byId = Dictionary(remoteItems.map { ($0.identifier, $0) }, uniquingKeysWith: { a, _ in a })
        matchByContentVersion(local: local, versions: versions, remote: byId, tree: tree, moves: &moves, report: &report)

        var renamed: [(from: String, to: String)] = []
        func current(_ path: String) -> String {
            for move in renamed.reversed() where ExactName.isSelfOrBelow(path, move.from) {
                return move.to + ExactName.dropPrefix(path, move.from)
            }
            return path
        }
        let ordered = moves.compactMap { old, new -> (ItemIdentifier, ItemIdentifier, String)? in
            guard let path = local[old], byId[old] == nil, byId[new] != nil, paths[new] != nil,
                  local[new] == nil else { return nil }
            return (old, new, path)
        }.sorted { FileSystem.depth($0.2) < FileSystem.depth($1.2) }
        for (old, new, recorded) in ordered {
            guard let item = byId[new], let target = paths[new] else { continue }
            let from = current(recorded)
            do {
                if !ExactName.equal(from, target) {
                    guard tree.lstat(target) == nil else { continue }
                    let parent = PathName.parent(of: target)
                    if !parent.isEmpty { try tree.makeDirectories(parent) }
                    guard tree.rename(from, target, flags: SystemConstants.renameNoReplace) == 0 else {
                        throw MAMError.fromErrno("rename \(from) to \(target)")
                    }
                    renamed.append((from, target))
                    report.movedLocally += 1
                }
                try tree.setAttribute(target, LocalItemAttributes.itemAttribute, new.rawValue)
                try? binding.database.remove(old)
                if item.type == .file {
                    remember(item, relative: target, movedFrom: old)
                } else {
                    try binding.database.recordIdentity(store: new, fileID: item.fileID, movedFrom: old)
                }
            } catch {
                report.errors.append(SyncIssue(path: from, error: error))
            }
        }
    }

    /// The provider items of the local tree below `relative`: store identifier -> local path,
    /// and the content version of each file.
    private func scanItems(_ relative: String, tree: ConfinedDirectory, into local: inout [ItemIdentifier: String],
                           versions: inout [ItemIdentifier: String]) {
        guard let entries = itemEntries(in: relative, tree: tree) else { return }
        for (child, st) in entries {
            if FileSystem.isDirectory(st) {
                if let id = tree.getAttribute(child, LocalItemAttributes.itemAttribute) { local[ItemIdentifier(id)] = child }
                scanItems(child, tree: tree, into: &local, versions: &versions)
            } else if FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(child, in: tree) {
                local[attributes.identifier] = child
                if let version = attributes.contentVersion { versions[attributes.identifier] = version }
            }
        }
    }

    /// Adds to `moves` the local files whose remote item is gone and which one new remote file
    /// has the content version of (a rename on a store without file ids), when the local file
    /// shows it is that file (`isMovedFile`); the identity is carried to the new store identifier.
    private func matchByContentVersion(local: [ItemIdentifier: String], versions: [ItemIdentifier: String],
                                       remote: [ItemIdentifier: RemoteItem], tree: ConfinedDirectory,
                                       moves: inout [ItemIdentifier: ItemIdentifier], report: inout SyncReport) {
        let targets = Set(moves.values)
        var appeared: [String: [ItemIdentifier]] = [:]
        for item in remote.values where item.type == .file && local[item.identifier] == nil && !targets.contains(item.identifier) {
            appeared[item.version.contentVersion, default: []].append(item.identifier)
        }
        for (id, version) in versions where remote[id] == nil && moves[id] == nil {
            guard let candidates = appeared[version], candidates.count == 1, let path = local[id],
                  let candidate = remote[candidates[0]],
                  isMovedFile(path, to: candidate, tree: tree, report: &report) else { continue }
            moves[id] = candidates[0]
            appeared[version] = nil
            _ = try? binding.database.recordIdentity(store: candidates[0], fileID: candidate.fileID, movedFrom: id)
        }
    }

    /// Whether the local file `relative`, whose remote item is gone, is `candidate` moved: an
    /// entity tag made of size and mtime is shared by other files, so the contentVersion alone
    /// is no proof. A placeholder is (it holds no bytes; its contents come from the new item)
    /// when the sizes agree; a materialized copy without local changes when its bytes equal
    /// the candidate's download (`ContentMatch`). A copy with local changes cannot show it and
    /// is not taken for a rename: it is kept as for a remote delete and uploaded as a new item.
    /// Download errors other than a vanished candidate are reported.
    private func isMovedFile(_ relative: String, to candidate: RemoteItem, tree: ConfinedDirectory,
                             report: inout SyncReport) -> Bool {
        guard let st = tree.lstat(relative), FileSystem.isRegular(st),
              let attributes = LocalItemAttributes.read(relative, in: tree) else { return false }
        if attributes.isPlaceholder { return attributes.size == candidate.size }
        guard !attributes.hasLocalChanges(st) else { return false }
        do {
            return try ContentMatch.remoteItem(candidate, store: binding.remote, equalsLocal: relative, in: tree,
                                               context: binding.context)
        } catch RemoteError.notFound {
            return false
        } catch {
            report.errors.append(SyncIssue(path: relative, error: error))
            return false
        }
    }
}
