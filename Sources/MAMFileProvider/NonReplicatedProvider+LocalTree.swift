import Foundation
import MAMSystem

extension NonReplicatedProvider {
    /// The entries of the local tree's directory `relative` ("" for the root) that can be
    /// provider items, each with its path relative to the root and its lstat: the provider's
    /// metadata directory at the root and temporary names are left out, and so is an entry
    /// that went while it was listed.
    /// - Returns: nil when the directory cannot be opened (gone, or not a directory).
    func itemEntries(in relative: String, tree: ConfinedDirectory) -> [(path: String, st: stat)]? {
        guard let names = tree.names(in: relative) else { return nil }
        return names.compactMap { name in
            if relative.isEmpty && name == ProviderLayout.metadataDirectoryName { return nil }
            if FileSystem.isTemporaryName(name) { return nil }
            let child = relative.isEmpty ? name : relative + "/" + name
            return tree.lstat(child).map { (child, $0) }
        }
    }
}
