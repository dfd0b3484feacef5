import Dispatch
import Foundation
import Glibc
import MAMFileProvider
import MAMProtection
import MAMTestSupport
import Testing
@testable import MAMFS

/// A remote whose moves stop after the remote side is done, before the provider writes the
/// item's new identifier locally, until `release()`: the moment a queued rename is between
/// the two.
private final class HeldMoveRemote: HookedRemote, @unchecked Sendable {
    let moved = DispatchSemaphore(value: 0)
    private let held = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var released = false

    override func afterMove(_ item: RemoteItem) {
        moved.signal()
        held.wait()
    }

    /// Lets a held move (and every later one) go on. Idempotent.
    func release() {
        let first = lock.withLock {
            defer { released = true }
            return !released
        }
        if first { held.signal() }
    }
}

/// A throwing call run on its own thread; `failure` is its error's description (nil: it
/// returned).
private final class BackgroundCall: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var error: String?
    private let body: () throws -> Void

    init(_ body: @escaping () throws -> Void) {
        self.body = body
        Thread.detachNewThread { [self] in
            do { try self.body() } catch { lock.withLock { self.error = "\(error)" } }
            done.signal()
        }
    }

    /// True once the call returned or threw, waiting at most `seconds` for it.
    func finished(within seconds: Double) -> Bool {
        guard done.wait(timeout: .now() + seconds) == .success else { return false }
        done.signal()
        return true
    }

    var failure: String? { lock.withLock { error } }
}

/// The non-replicated mount's hooks driven directly over an overlay core, with a remote that
/// can stop a provider call half-way.
@Suite("Non-replicated mount hooks without FUSE")
struct NonReplicatedHooksTests {
    @Test("a placeholder opened while its queued rename has moved the remote item but not yet written the new identifier downloads the moved item")
    func materializeWaitsForQueuedRename() throws {
        let f = try OverlayCoreFixture()
        let remoteRoot = f.base + "/remote"
        let bytes = Data("contents of the remote file\n".utf8)
        try FileManager.default.createDirectory(atPath: remoteRoot + "/docs", withIntermediateDirectories: true)
        try bytes.write(to: URL(fileURLWithPath: remoteRoot + "/docs/a.txt"))
        let remote = HeldMoveRemote(LocalDirectoryRemote(root: remoteRoot))
        let domain = try FileProviderDomain(account: OverlayCoreFixture.account, remote: remote, context: f.context)
        let provider = try NonReplicatedProvider(localRoot: f.backing, domain: domain)
        #expect(try provider.createPlaceholders().errors.isEmpty)
        let hooks = NonReplicatedMountHooks(provider: provider, schedule: RetrySchedule(), log: { _ in })
        defer {
            remote.release()
            hooks.stop()
        }

        let docs = try f.request { try f.fs.lookup(parent: f.root, name: "docs", caller: f.caller) }
        let file = try f.request { try f.fs.lookup(parent: docs.nodeid, name: "a.txt", caller: f.caller) }
        let docsInode = try #require(f.fs.table.inode(docs.nodeid))
        let fileInode = try #require(f.fs.table.inode(file.nodeid))
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.backing + "/docs/a.txt") != nil)

        // mv docs/a.txt b.txt: the local rename now, the remote move queued.
        try "a.txt".withCString { name in
            try "b.txt".withCString { newName in
                try f.request {
                    try hooks.renaming(RenameRequest(from: docsInode, name: name, to: f.fs.table.root, newName: newName, exchange: false),
                                       fs: f.fs) {
                        guard renameat(docsInode.fd, name, f.fs.table.root.fd, newName) == 0 else { throw FilesystemError.current() }
                    }
                }
            }
        }
        try #require(remote.moved.wait(timeout: Patience.deadline(60)) == .success, "the queued rename reached the remote")

        // The open's materialization, from another thread (a FUSE request).
        let call = BackgroundCall { try DescriptorCache.withPins { try hooks.materializeIfPlaceholder(fileInode, in: f.fs) } }
        // A materialization that does not wait for the queued rename is done (or failed) by
        // now; one that waits is still waiting. Either way the rename goes on afterwards.
        _ = call.finished(within: 2)
        remote.release()
        try #require(call.finished(within: Patience.bound(60)), "the materialization ended")

        #expect(call.failure == nil, "materialization failed: \(call.failure ?? "")")
        #expect(NonReplicatedProvider.placeholderInfo(localPath: f.backing + "/b.txt") == nil, "materialized")
        #expect(FileManager.default.contents(atPath: remoteRoot + "/b.txt") == bytes, "moved on the remote")
        #expect(!FileManager.default.fileExists(atPath: remoteRoot + "/docs/a.txt"))
        let handle = try f.request { try f.fs.open(file.nodeid, flags: O_RDONLY, caller: f.caller) }
        defer { f.fs.release(handle, caller: f.caller) }
        #expect(try f.read(handle) == Array(bytes), "the remote bytes through the mount")
    }
}
