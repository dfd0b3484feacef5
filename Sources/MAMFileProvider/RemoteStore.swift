import Foundation
import MAMProtection

/// Names one item of a remote store (mirrors `NSFileProviderItemIdentifier`).
///
/// Two kinds of values share the type. A store identifier is what a `RemoteStore` calls an
/// item (for `LocalDirectoryRemote`: the path relative to the remote root), and may change
/// when the item or a parent moves; the providers address the store with it. A stable
/// identifier is what the providers show (`FileProviderItem` from a provider,
/// `ProviderItemStatus`): kept in the provider database, it stays the same across renames and
/// moves made on either side, and is the store identifier the item had when first seen
/// (see ProviderDatabase+Identities). Both are opaque. `rootContainer` names the root of every
/// store and is its own stable identifier.
///
/// Identifiers are equal, hashed and ordered by their exact UTF-8 bytes, never by Unicode
/// canonical equivalence: `cafe` + U+0301 and `caf` + U+00E9 are two items (as they are two
/// files on Linux), so two remote names can never merge into one item.
public struct ItemIdentifier: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    /// The store's name for the item.
    public let rawValue: String
    /// Wraps a store's name for an item.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a store's name for an item.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The root container (mirrors `NSFileProviderItemIdentifier.rootContainer`).
    public static let rootContainer = ItemIdentifier(rawValue: ".")

    public var description: String { rawValue }
    public static func == (a: ItemIdentifier, b: ItemIdentifier) -> Bool { a.rawValue.utf8.elementsEqual(b.rawValue.utf8) }
    public func hash(into hasher: inout Hasher) {
        for byte in rawValue.utf8 { hasher.combine(byte) }
        hasher.combine(0xFF as UInt8)
    }
    public static func < (a: ItemIdentifier, b: ItemIdentifier) -> Bool {
        a.rawValue.utf8.lexicographicallyPrecedes(b.rawValue.utf8)
    }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// What kind of node an item is (mirrors `NSFileProviderItem.contentType` reduced to what a
/// POSIX tree has; other node kinds — fifos, sockets, devices — are not synced).
public enum ItemType: String, Codable, Sendable {
    case file
    case directory
    case symlink
}

/// The versions of an item (mirrors `NSFileProviderItemVersion`): `contentVersion` changes when
/// the bytes change, `metadataVersion` when the name, place or attributes change. Opaque
/// strings compared for equality only.
public struct ItemVersion: Hashable, Codable, Sendable {
    /// Changes whenever the bytes change.
    public var contentVersion: String
    /// Changes whenever the name, place or attributes change.
    public var metadataVersion: String
    public init(contentVersion: String, metadataVersion: String) {
        self.contentVersion = contentVersion
        self.metadataVersion = metadataVersion
    }
}

/// One item as the remote store describes it. Plain bytes only: a remote never holds
/// protected files, so it has no owner; the domain gives items their owner (`FileProviderItem`).
public struct RemoteItem: Hashable, Sendable {
    /// The item's identifier in the store.
    public var identifier: ItemIdentifier
    /// The containing directory (`.rootContainer` at the top).
    public var parentIdentifier: ItemIdentifier
    /// The name inside the parent.
    public var filename: String
    /// File, directory or symlink.
    public var type: ItemType
    /// Size in bytes of the remote contents (0 for directories; the target length for symlinks).
    public var size: Int64
    /// Content and metadata versions.
    public var version: ItemVersion
    /// Permission bits (`st_mode & 0o7777`) when the store knows them, else nil.
    public var mode: UInt32?
    /// The link target, for symlinks.
    public var symlinkTarget: String?
    /// The store's own identity of the item that survives renames and moves, when it has one
    /// (a server's file id such as Nextcloud's `oc:fileid`; a local directory's device and
    /// inode), else nil. Opaque, compared for equality only.
    public var fileID: String?

    public init(identifier: ItemIdentifier, parentIdentifier: ItemIdentifier, filename: String, type: ItemType,
                size: Int64, version: ItemVersion, mode: UInt32? = nil, symlinkTarget: String? = nil,
                fileID: String? = nil) {
        self.identifier = identifier
        self.parentIdentifier = parentIdentifier
        self.filename = filename
        self.type = type
        self.size = size
        self.version = version
        self.mode = mode
        self.symlinkTarget = symlinkTarget
        self.fileID = fileID
    }
}

/// What a new remote item is made of.
public enum RemoteContents: Sendable {
    /// A regular file with the (plain) bytes of the local file at the URL.
    case file(URL)
    /// An empty directory.
    case directory
    /// A symbolic link with this target.
    case symlink(String)
}

/// Errors of a remote store. Every store maps its own failures to these, so the providers
/// handle a WebDAV or S3 store exactly like the local-directory one.
public enum RemoteError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The store cannot be reached (directory removed or unmounted, network down). Nothing
    /// was changed; retry later.
    case unreachable(String)
    /// The store refuses writes (read-only mount, permissions, a read-only share).
    case readOnly(String)
    /// The item changed on the remote since `baseVersion` (or the name is taken): the
    /// operation was not done. Carries the item and, when known, its current version.
    case conflict(ItemIdentifier, current: ItemVersion?)
    /// No such item (deleted or renamed on the remote).
    case notFound(ItemIdentifier)
    /// The store refused the credentials or the access (HTTP 401/403). Nothing was changed;
    /// the message never holds a password.
    case unauthorized(String)
    /// The store has no room for the item (HTTP 507). Nothing was changed.
    case insufficientStorage(ItemIdentifier)
    /// Any other failure with the errno or HTTP-like detail in the message.
    case failed(String)

    public var description: String {
        switch self {
        case .unreachable(let m): return "remote unreachable: \(m)"
        case .readOnly(let m): return "remote is read-only: \(m)"
        case .conflict(let id, _): return "remote item '\(id)' changed since the base version (conflict)"
        case .notFound(let id): return "remote item '\(id)' not found"
        case .unauthorized(let m): return "remote refused access: \(m)"
        case .insufficientStorage(let id): return "remote has no room for '\(id)' (insufficient storage)"
        case .failed(let m): return "remote error: \(m)"
        }
    }

    /// The same condition as a `MAMError` (for the CLI's exit code and the mount's errno):
    /// unreachable -> `.system(EHOSTUNREACH)` (`ExitCode.ioErr`), read-only -> `.system(EROFS)` (`ExitCode.cantCreate`),
    /// conflict -> `.system(EBUSY)` (`ExitCode.ioErr`), not found -> `.fileNotFound` (`ExitCode.noInput`),
    /// unauthorized -> `.system(EACCES)` (`ExitCode.noPerm`), insufficient storage ->
    /// `.system(EIO)` (`ExitCode.ioErr`, the item named), failed -> `.system(EIO)` (`ExitCode.ioErr`).
    public var mamError: MAMError {
        switch self {
        case .unreachable: return .system(description, errno: EHOSTUNREACH)
        case .readOnly: return .system(description, errno: EROFS)
        case .conflict: return .system(description, errno: EBUSY)
        case .notFound(let id): return .fileNotFound("remote item '\(id)'")
        case .unauthorized: return .system(description, errno: EACCES)
        case .insufficientStorage: return .system(description, errno: EIO)
        case .failed: return .system(description, errno: EIO)
        }
    }
}

/// A cloud store holding plain files, seen through versioned items.
///
/// Mirrors the server side an `NSFileProviderReplicatedExtension` talks to: enumerate with
/// versions, fetch contents, create, modify with a base version, delete, move. Stores must
/// be safe to call from several threads. Every method throws `RemoteError`; a store that
/// cannot be reached throws `.unreachable` and changes nothing.
///
/// Identity: an `ItemIdentifier` may change when an item is moved (path-keyed stores such as
/// `LocalDirectoryRemote`, WebDAV or S3) or stay the same (id-keyed stores). Providers never
/// assume either: after a `move` they take the identifiers the store returns, re-read the
/// moved subtree, and they recognise a rename done on the remote side by `RemoteItem.fileID`
/// when the store has one, else by an item that disappeared and one that appeared with the
/// same type and `contentVersion`. What they show is their own stable identifier, kept across
/// both (`ItemIdentifier`).
public protocol RemoteStore: Sendable {
    /// A short description for messages and the provider configuration (e.g. the root path).
    var location: String { get }

    /// Identifies the storage behind the store (a volume or bucket), or nil when the store has
    /// no such notion. Providers remember it and refuse to sync when it changes, so a remote
    /// that was unmounted and shows an empty directory is never mistaken for "everything was
    /// deleted".
    func volumeIdentity() throws -> String?

    /// The direct children of `container`, in no particular order.
    /// - Throws: `.unreachable`, `.notFound(container)`.
    func enumerate(container: ItemIdentifier) throws -> [RemoteItem]

    /// One item.
    /// - Throws: `.unreachable`, `.notFound`.
    func item(_ identifier: ItemIdentifier) throws -> RemoteItem

    /// Copies the bytes of a file item into `destination` (an existing local file the caller
    /// created 0600, truncated and overwritten here).
    /// - Returns: the item as it was when read (its version names the bytes written).
    /// - Throws: `.unreachable`, `.notFound`, `.conflict` when the file kept changing while it
    ///   was read, `.failed` for a directory or I/O errors.
    func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem

    /// Says that the contents of these file items will be read soon, in this order
    /// (`readContents`), so a store can start fetching them now (a local directory asks the
    /// kernel to read them ahead). A hint: nothing is returned or thrown; a store that cannot
    /// use it does nothing (the default).
    func prefetchContents(of identifiers: [ItemIdentifier])

    /// Creates `name` in `parent`.
    /// - Returns: the new item.
    /// - Throws: `.conflict` when the name is taken, `.notFound(parent)`, `.readOnly`, `.unreachable`.
    func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem

    /// Replaces the bytes of a file item with those of `contentsURL`, only if its current
    /// content version is `baseVersion`.
    /// - Returns: the item with its new version.
    /// - Throws: `.conflict` when the content version is no longer `baseVersion`,
    ///   `.notFound`, `.readOnly`, `.unreachable`.
    func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem

    /// Deletes an item (a directory only when empty), only if its current content version is
    /// `baseVersion` (nil: whatever it is).
    /// - Throws: `.conflict` (changed, or a directory that is not empty), `.notFound`,
    ///   `.readOnly`, `.unreachable`.
    func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws

    /// Moves and/or renames an item. Metadata only: the contents are not re-sent.
    /// - Returns: the item at its new place (its identifier may have changed, see the type).
    /// - Throws: `.conflict` when the new name is taken, `.notFound`, `.readOnly`, `.unreachable`.
    func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem
}

extension RemoteStore {
    /// Does nothing: a store reads each file when asked.
    public func prefetchContents(of identifiers: [ItemIdentifier]) {}

    /// Every item below `container` (not `container` itself), parents before children: a
    /// level of the tree at a time, the directories of a level listed side by side (a cold
    /// disk or a remote server answers several listings at once faster than one after the
    /// other), each directory's children by name.
    ///
    /// The tree is read one directory at a time, so it can change in between: a directory
    /// that a listing showed and that is gone when it is read itself (moved or deleted on the
    /// remote meanwhile) would look empty, and a pass would take its children for deleted. The
    /// walk then starts again, at most `attempts` times in all.
    ///
    /// A remote that lies cannot make the walk endless: a directory listed twice (one
    /// identifier) is read once, and a tree deeper than `TreeDepth.maximum` levels is an error.
    /// - Throws: what `enumerate(container:)` throws (for the first directory of a level that
    ///   failed); `.unreachable` when the tree changed under every attempt (retry later:
    ///   nothing may be concluded from a torn listing); `.failed` for a tree too deep.
    public func enumerateTree(from container: ItemIdentifier = .rootContainer, attempts: Int = 3) throws -> [RemoteItem] {
        var vanished: ItemIdentifier?
        for _ in 0..<max(1, attempts) {
            var result: [RemoteItem] = []
            var level = [container]
            var queued: Set<ItemIdentifier> = [container]
            var depth = 0
            vanished = nil
            walk: while !level.isEmpty {
                depth += 1
                guard depth <= TreeDepth.maximum + 1 else {
                    throw RemoteError.failed("\(location): the tree is more than \(TreeDepth.maximum) directory levels deep; not listed")
                }
                var next: [ItemIdentifier] = []
                for listing in enumerateSideBySide(level) {
                    let children: [RemoteItem]
                    switch listing {
                    case .success(let items):
                        children = items
                    case .failure(RemoteError.notFound(let id)) where id != container:
                        vanished = id
                        break walk
                    case .failure(let error):
                        throw error
                    }
                    for child in children.sorted(by: { $0.filename < $1.filename }) {
                        result.append(child)
                        if child.type == .directory, queued.insert(child.identifier).inserted { next.append(child.identifier) }
                    }
                }
                level = next
            }
            if vanished == nil { return result }
        }
        throw RemoteError.unreachable("\(location): '\(vanished?.rawValue ?? "")' moved or vanished while the tree was listed, \(attempts) times")
    }

    /// `enumerate(container:)` of each of `containers`, several at once, in their order.
    private func enumerateSideBySide(_ containers: [ItemIdentifier]) -> [Result<[RemoteItem], any Error>] {
        if containers.count == 1 { return [Result { try enumerate(container: containers[0]) }] }
        let listings = ListingSlots(count: containers.count)
        DispatchQueue.concurrentPerform(iterations: containers.count) { index in
            listings.set(index, Result { try enumerate(container: containers[index]) })
        }
        return listings.all
    }
}

/// The results of listings made side by side, one slot each.
private final class ListingSlots: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Result<[RemoteItem], any Error>]

    init(count: Int) {
        slots = Array(repeating: .success([]), count: count)
    }

    func set(_ index: Int, _ result: Result<[RemoteItem], any Error>) {
        lock.withLock { slots[index] = result }
    }

    var all: [Result<[RemoteItem], any Error>] { lock.withLock { slots } }
}
