import Foundation
import MAMFileProvider

/// A remote store (any kind) with points a test can act at: `beforeRead(_:)` (with the
/// read's 1-based count, under a lock) just before each file read, and `afterMove(_:)` once a
/// move is done on the remote, before it returns to the provider. Subclasses make something
/// happen in the middle of a sync or of a provider call.
open class HookedRemote: RemoteStore, @unchecked Sendable {
    public let inner: any RemoteStore
    private let lock = NSLock()
    private var reads = 0

    public init(_ inner: any RemoteStore) { self.inner = inner }

    /// Runs before read number `count`; does nothing here.
    open func beforeRead(_ count: Int) {}

    /// Runs before each file read, outside the lock; what it throws is the read's error (a
    /// server that fails that file). Does nothing here.
    open func checkRead(_ identifier: ItemIdentifier) throws {}

    /// Runs before each listing of a container; does nothing here.
    open func beforeEnumerate(_ container: ItemIdentifier) {}

    /// Runs after the remote moved an item (`moved` is the item at its new identifier); does
    /// nothing here.
    open func afterMove(_ moved: RemoteItem) {}

    public var location: String { inner.location }
    public func volumeIdentity() throws -> String? { try inner.volumeIdentity() }
    public func enumerate(container: ItemIdentifier) throws -> [RemoteItem] {
        beforeEnumerate(container)
        return try inner.enumerate(container: container)
    }
    public func item(_ identifier: ItemIdentifier) throws -> RemoteItem { try inner.item(identifier) }
    public func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem {
        lock.lock()
        reads += 1
        beforeRead(reads)
        lock.unlock()
        try checkRead(identifier)
        return try inner.readContents(of: identifier, into: destination)
    }
    public func prefetchContents(of identifiers: [ItemIdentifier]) { inner.prefetchContents(of: identifiers) }
    public func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem {
        try inner.create(parent: parent, name: name, contents: contents)
    }
    public func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem {
        try inner.modify(identifier, baseVersion: baseVersion, contentsURL: contentsURL)
    }
    public func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws { try inner.delete(identifier, baseVersion: baseVersion) }
    public func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem {
        let moved = try inner.move(identifier, toParent: newParent, newName: newName)
        afterMove(moved)
        return moved
    }
}
