import Foundation
import MAMProtection

/// A placeholder's contents downloaded beside the provider's serial work (the mount's queue),
/// so one slow download holds neither the other opens of placeholders nor the remote changes
/// queued behind it: the mount downloads first (`prefetchPlaceholder`), then replaces the
/// placeholder on its queue (`startProvidingItem(localPath:prefetched:)`), where the placeholder
/// must still stand for the item and version that were downloaded.
public final class PlaceholderDownload: @unchecked Sendable {
    /// The item the placeholder stood for when the download started.
    let identifier: ItemIdentifier
    /// Its content version then.
    let contentVersion: String?
    /// The plain bytes (in memory only) and the item as the download found it, or the failure.
    let result: Result<(plain: PlainBuffer, item: RemoteItem), any Error>

    init(identifier: ItemIdentifier, contentVersion: String?, result: Result<(plain: PlainBuffer, item: RemoteItem), any Error>) {
        self.identifier = identifier
        self.contentVersion = contentVersion
        self.result = result
    }
}

extension NonReplicatedProvider {
    /// Downloads the contents of the placeholder at `localPath` into memory, without touching
    /// the local tree. Never throws: a failed download is kept for
    /// `startProvidingItem(localPath:prefetched:)` to report.
    /// - Returns: nil when `localPath` is not a placeholder (materialized, not an item, gone).
    public func prefetchPlaceholder(localPath: String) -> PlaceholderDownload? {
        guard let relative = try? relative(localPath), let tree = try? tree(),
              let attributes = LocalItemAttributes.read(relative, in: tree), attributes.isPlaceholder else { return nil }
        return PlaceholderDownload(identifier: attributes.identifier, contentVersion: attributes.contentVersion,
                                   result: Result { try download(attributes.identifier) })
    }

    /// `startProvidingItem(localPath:)` with the contents `prefetched` brought, while the
    /// placeholder still stands for the item and version they were downloaded for (a failed
    /// download is then this call's error); a placeholder renamed, refreshed or replaced since
    /// (or no `prefetched`) is downloaded here.
    /// - Throws: as `startProvidingItem(localPath:)`.
    public func startProvidingItem(localPath: String, prefetched: PlaceholderDownload?) throws {
        try ProviderError.mapped {
            let relative = try relative(localPath)
            let tree = try tree()
            guard let attributes = LocalItemAttributes.read(relative, in: tree) else {
                throw MAMError.invalidArguments("\(localPath) is not a file-provider item")
            }
            guard attributes.isPlaceholder else { return }
            let (plain, item): (plain: PlainBuffer, item: RemoteItem)
            if let prefetched, prefetched.identifier == attributes.identifier, prefetched.contentVersion == attributes.contentVersion {
                (plain, item) = try prefetched.result.get()
            } else {
                (plain, item) = try download(attributes.identifier)
            }
            try installProvidedCopy(plain: plain, item: item, at: relative, in: tree) {
                // Only replace what is still the same placeholder.
                LocalItemAttributes.read(relative, in: tree).map { $0.isPlaceholder && $0.identifier == attributes.identifier } ?? false
            }
        }
    }

    /// The plain bytes of the remote item `identifier`, kept in memory only (only the provided
    /// copy goes to the disk), and the item as the download found it.
    private func download(_ identifier: ItemIdentifier) throws -> (plain: PlainBuffer, item: RemoteItem) {
        let plain = try PlainBuffer(name: "mamfs-download")
        let item = try binding.remote.readContents(of: identifier, into: plain.url)
        return (plain, item)
    }
}
