import Foundation
import MAMProtection
import MAMSystem

/// How a replicated pass makes what it put in the replica durable: syncfs(2) of the replica's
/// filesystem. One per provider; it counts its calls (`calls`), and tests put a subclass in its
/// place to count or to fail.
class ReplicaSync: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    init() {}

    /// How many times `sync` ran.
    var calls: Int { lock.withLock { count } }

    /// syncfs(2) of the filesystem of `descriptor` (the replica root, opened for reading before
    /// the pass wrote anything, so every writeback error since is reported).
    /// - Throws: `MAMError.system` with the errno (EIO, ENOSPC, EDQUOT: something the pass or
    ///   anyone else wrote on that filesystem could not be written back).
    func sync(_ descriptor: Int32, root: String) throws {
        lock.withLock { count += 1 }
        do {
            try SystemCall.syncFilesystem(fd: descriptor)
        } catch {
            throw MAMError.system("syncfs of the filesystem of \(root)", errno: error.rawValue)
        }
    }
}
