import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMSystem
import MAMTestSupport

/// A local-directory remote whose move number `failing` (1-based) is refused (read-only).
private final class RefusingMove: RemoteStore, @unchecked Sendable {
    let inner: LocalDirectoryRemote
    let failing: Int
    private let lock = NSLock()
    private(set) var moves = 0

    init(_ inner: LocalDirectoryRemote, failing: Int) {
        self.inner = inner
        self.failing = failing
    }

    var location: String { inner.location }
    func volumeIdentity() throws -> String? { try inner.volumeIdentity() }
    func enumerate(container: ItemIdentifier) throws -> [RemoteItem] { try inner.enumerate(container: container) }
    func item(_ identifier: ItemIdentifier) throws -> RemoteItem { try inner.item(identifier) }
    func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem {
        try inner.readContents(of: identifier, into: destination)
    }
    func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem {
        try inner.create(parent: parent, name: name, contents: contents)
    }
    func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem {
        try inner.modify(identifier, baseVersion: baseVersion, contentsURL: contentsURL)
    }
    func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws { try inner.delete(identifier, baseVersion: baseVersion) }
    func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem {
        lock.lock()
        moves += 1
        let refuse = moves == failing
        lock.unlock()
        if refuse { throw RemoteError.readOnly("move \(identifier) refused") }
        return try inner.move(identifier, toParent: newParent, newName: newName)
    }
}

/// renameat2(RENAME_EXCHANGE) of two absolute paths.
private func exchangePaths(_ a: String, _ b: String) -> Bool {
    (try? SystemCall.rename(from: AT_FDCWD, a, to: AT_FDCWD, b, flags: SystemConstants.renameExchange)) != nil
}

@Suite("Non-replicated provider: upload queue")
struct UploadQueueTests {
    @Test("retry delays: the base, doubling, at most the cap")
    func retrySchedule() {
        let schedule = RetrySchedule(base: 1, cap: 300)
        #expect((1...10).map { schedule.delay(afterAttempts: $0) } == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300])
        #expect(RetrySchedule(base: 0.25).delay(afterAttempts: 3) == 1)
    }

    @Test("rows: recorded in order, a second content change of a path merged into the waiting one until another kind of change comes; a replay against an unreachable remote keeps every row (attempts, next retry, last error), the remote back it runs them in order and empties the queue")
    func rowsAndReplay() throws {
        let f = try ProviderFixture()
        try f.writeRemote("old.txt", Array("old".utf8))
        try f.writeRemote("gone.txt", Array("gone".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        let gone = try #require(LocalItemAttributes.read(path: f.localPath("gone.txt")))

        try f.writeLocalProtected("a.txt", Array("first".utf8))
        let first = try provider.record(QueuedChange(kind: .changed, path: "a.txt"))
        #expect(try provider.record(QueuedChange(kind: .changed, path: "a.txt")) == first, "merged")
        #expect(rename(f.localPath("a.txt"), f.localPath("b.txt")) == 0)
        try provider.record(QueuedChange(kind: .renamed, path: "b.txt"))
        try f.writeLocalProtected("a.txt", Array("second".utf8))
        #expect(try provider.record(QueuedChange(kind: .changed, path: "a.txt")) != first, "not merged across a rename")
        #expect(unlink(f.localPath("gone.txt")) == 0)
        try provider.record(QueuedChange(kind: .removed, path: "gone.txt", item: gone.identifier, baseVersion: gone.contentVersion))
        #expect(mkdir(f.localPath("empty"), 0o755) == 0)
        try provider.record(QueuedChange(kind: .madeDirectory, path: "empty"))
        #expect(link(f.localPath("old.txt"), f.localPath("old-link.txt")) == 0)
        try provider.record(QueuedChange(kind: .linked, path: "old-link.txt"))
        #expect(try provider.queueStatus().entries == ["changed a.txt", "renamed b.txt", "changed a.txt", "removed gone.txt",
                                                        "mkdir empty", "link old-link.txt"])

        #expect(rename(f.remoteRoot, f.remoteRoot + ".gone") == 0)
        var lines: [String] = []
        let outcome = provider.replayQueue(schedule: RetrySchedule(base: 30), log: { lines.append($0) })
        guard case .waiting(let until) = outcome else {
            Issue.record("expected a wait, got \(outcome)")
            return
        }
        #expect(until > Date().timeIntervalSince1970 + 20)
        let status = try provider.queueStatus()
        #expect(status.count == 6 && status.lastError?.contains("unreachable") == true, "\(status)")
        #expect(try provider.queuedEntries().first?.attempts == 1)
        #expect(lines.count == 1 && lines[0].contains("not uploaded"), "\(lines)")
        #expect(provider.replayQueue(schedule: RetrySchedule(base: 30), log: { lines.append($0) }) == .waiting(until: until),
                "not retried before it is due")
        #expect(try provider.queuedEntries().first?.attempts == 1)

        #expect(rename(f.remoteRoot + ".gone", f.remoteRoot) == 0)
        #expect(provider.replayQueue(schedule: RetrySchedule(base: 30), ignoringBackoff: true, log: { lines.append($0) }) == .empty)
        #expect(try provider.queuedEntries().isEmpty)
        #expect(lines.count == 1, "\(lines)")
        #expect(try f.read(f.remotePath("b.txt")) == Array("first".utf8))
        #expect(try f.read(f.remotePath("a.txt")) == Array("second".utf8))
        #expect(!f.exists(f.remotePath("gone.txt")))
        var st = stat()
        #expect(lstat(f.remotePath("empty"), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR)
        #expect(try f.read(f.remotePath("old-link.txt")) == Array("old".utf8), "link of a placeholder: the remote bytes")
        #expect(f.files(under: f.remoteRoot).sorted() == ["a.txt", "b.txt", "old-link.txt", "old.txt"])
        f.expectRemotePlain()
    }

    @Test("exchange of two provided items: three remote moves, each local name then uploads to the remote item of its name; a failed middle move is undone")
    func exchange() throws {
        let f = try ProviderFixture()
        try f.writeRemote("x.txt", Array("ex".utf8))
        try f.writeRemote("y.txt", Array("why".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        try provider.startProvidingItem(localPath: f.localPath("x.txt"))
        #expect(exchangePaths(f.localPath("x.txt"), f.localPath("y.txt")))
        try provider.record(QueuedChange(kind: .exchanged, path: "x.txt", otherPath: "y.txt"))
        #expect(provider.replayQueue(schedule: RetrySchedule(), log: { Issue.record("\($0)") }) == .empty)
        #expect(try f.read(f.remotePath("x.txt")) == Array("why".utf8))
        #expect(try f.read(f.remotePath("y.txt")) == Array("ex".utf8))
        #expect(f.files(under: f.remoteRoot).sorted() == ["x.txt", "y.txt"])
        #expect(LocalItemAttributes.read(path: f.localPath("x.txt"))?.identifier == ItemIdentifier("x.txt"))
        #expect(LocalItemAttributes.read(path: f.localPath("y.txt"))?.identifier == ItemIdentifier("y.txt"))
        try f.writeLocalProtected("y.txt", Array("ex, edited".utf8))
        try provider.itemChanged(localPath: f.localPath("y.txt"))
        #expect(try f.read(f.remotePath("y.txt")) == Array("ex, edited".utf8))
        #expect(try f.read(f.remotePath("x.txt")) == Array("why".utf8))

        // Exchanged again, the middle move refused: the first one is undone, the change logged.
        let refusing = RefusingMove(f.remote(), failing: 2)
        let second = try f.nonReplicated(remote: refusing)
        #expect(exchangePaths(f.localPath("x.txt"), f.localPath("y.txt")))
        try second.record(QueuedChange(kind: .exchanged, path: "x.txt", otherPath: "y.txt"))
        var lines: [String] = []
        #expect(second.replayQueue(schedule: RetrySchedule(), log: { lines.append($0) }) == .empty)
        #expect(refusing.moves == 3, "aside, refused, back")
        #expect(lines.count == 1 && lines[0].contains("remote exchange not done"), "\(lines)")
        #expect(try f.read(f.remotePath("x.txt")) == Array("why".utf8))
        #expect(try f.read(f.remotePath("y.txt")) == Array("ex, edited".utf8))
        #expect(f.files(under: f.remoteRoot).sorted() == ["x.txt", "y.txt"], "no temporary name left")
        f.expectRemotePlain()
    }

    @Test("a queue replayed by another process (by paths) follows the later renames and exchanges in it: an exchange, a rename of one side and a new file under its old name, all while the remote was away")
    func replayByPathFollowsLaterMoves() throws {
        let f = try ProviderFixture()
        try f.writeRemote("ea", Array("AAA".utf8))
        try f.writeRemote("eb", Array("BBB".utf8))
        let provider = try f.nonReplicated()
        _ = try provider.createPlaceholders()
        #expect(exchangePaths(f.localPath("eb"), f.localPath("ea")))
        try provider.record(QueuedChange(kind: .exchanged, path: "ea", otherPath: "eb"))
        #expect(rename(f.localPath("eb"), f.localPath("ec")) == 0)
        try provider.record(QueuedChange(kind: .renamed, path: "ec", otherPath: "eb"))
        try f.writeLocalProtected("eb", Array("newb".utf8))
        try provider.record(QueuedChange(kind: .changed, path: "eb"))
        #expect(try provider.queueStatus().entries == ["exchanged ea eb", "renamed ec", "changed eb"])

        #expect(provider.replayQueue(schedule: RetrySchedule(), log: { Issue.record("\($0)") }) == .empty)
        #expect(f.files(under: f.remoteRoot).sorted() == ["ea", "eb", "ec"])
        for (name, bytes) in [("ea", "BBB"), ("eb", "newb"), ("ec", "AAA")] {
            #expect(try f.read(f.remotePath(name)) == Array(bytes.utf8), "remote \(name)")
            try provider.startProvidingItem(localPath: f.localPath(name))
            #expect(try f.plaintext(f.localPath(name)) == Array(bytes.utf8), "local \(name)")
        }
        f.expectRemotePlain()
    }

    @Test("forwarding a recorded path: renames (a directory's too) and exchanges move it, a removal or a rename over it ends it, a rename without its old path is not followed")
    func forwardedPaths() {
        let later: [QueuedChange] = [
            QueuedChange(kind: .renamed, path: "d2", otherPath: "d"),
            QueuedChange(kind: .exchanged, path: "d2/x", otherPath: "y"),
            QueuedChange(kind: .renamed, path: "z"),
        ]
        #expect(NonReplicatedProvider.forwarded("d/x", through: later) == "y")
        #expect(NonReplicatedProvider.forwarded("y", through: later) == "d2/x")
        #expect(NonReplicatedProvider.forwarded("d/w/v", through: later) == "d2/w/v")
        #expect(NonReplicatedProvider.forwarded("z", through: later) == "z")
        #expect(NonReplicatedProvider.forwarded("a", through: [QueuedChange(kind: .removed, path: "a", item: ItemIdentifier("a"))]) == nil)
        #expect(NonReplicatedProvider.forwarded("b", through: [QueuedChange(kind: .renamed, path: "b", otherPath: "c")]) == nil)
        #expect(NonReplicatedProvider.forwarded("c", through: [QueuedChange(kind: .renamed, path: "b", otherPath: "c")]) == "b")
    }
}

