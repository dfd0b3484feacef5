import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// The `RemoteStore` contract, the same assertions on every store: a plain directory and a
/// real Apache WebDAV server.
@Suite("Remote store contract")
struct RemoteStoreContractTests {
    private func scratchFile(_ bytes: [UInt8]) throws -> (TempDirectory, URL) {
        let scratch = try TempDirectory(prefix: "mamfs-contract")
        let url = URL(fileURLWithPath: scratch.file("contents"))
        try Data(bytes).write(to: url)
        return (scratch, url)
    }

    private func readThrough(_ store: any RemoteStore, _ id: ItemIdentifier) throws -> (RemoteItem, [UInt8]) {
        let (scratch, url) = try scratchFile([])
        let item = try store.readContents(of: id, into: url)
        let bytes = Array(try Data(contentsOf: url))
        _ = scratch
        return (item, bytes)
    }

    @Test("create, enumerate, item, read, modify with the base version, move, delete", arguments: RemoteKind.available)
    func lifecycle(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        let store = try remote.store()
        let folder = try store.create(parent: .rootContainer, name: "docs", contents: .directory)
        #expect(folder.type == .directory && folder.identifier == ItemIdentifier("docs"))
        let (scratch, url) = try scratchFile(Array("first version\n".utf8))
        let file = try store.create(parent: folder.identifier, name: "a.txt", contents: .file(url))
        #expect(file.identifier == ItemIdentifier("docs/a.txt") && file.parentIdentifier == folder.identifier)
        #expect(file.filename == "a.txt" && file.type == .file && file.size == 14)
        #expect(try remote.read("docs/a.txt") == Array("first version\n".utf8))

        #expect(try store.enumerate(container: .rootContainer).map(\.filename) == ["docs"])
        #expect(try store.enumerate(container: folder.identifier).map(\.identifier) == [file.identifier])
        #expect(try store.item(file.identifier).version == file.version)
        let (read, bytes) = try readThrough(store, file.identifier)
        #expect(bytes == Array("first version\n".utf8))
        #expect(read.version.contentVersion == file.version.contentVersion)

        try Data("second, longer version\n".utf8).write(to: url)
        let modified = try store.modify(file.identifier, baseVersion: file.version.contentVersion, contentsURL: url)
        #expect(modified.version.contentVersion != file.version.contentVersion)
        #expect(try remote.read("docs/a.txt") == Array("second, longer version\n".utf8))
        #expect(modified.size == 23)

        let moved = try store.move(file.identifier, toParent: .rootContainer, newName: "b.txt")
        #expect(moved.identifier == ItemIdentifier("b.txt") && moved.parentIdentifier == .rootContainer)
        #expect(try remote.read("b.txt") == Array("second, longer version\n".utf8))
        #expect(throws: RemoteError.notFound(file.identifier)) { try store.item(file.identifier) }

        try store.delete(moved.identifier, baseVersion: moved.version.contentVersion)
        try store.delete(folder.identifier, baseVersion: nil)
        #expect(try store.enumerate(container: .rootContainer).isEmpty)
        #expect(remote.files().isEmpty)
        _ = scratch
    }

    @Test("a stale base version is a conflict carrying the current version; nothing is changed", arguments: RemoteKind.available)
    func staleVersionConflicts(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        let store = try remote.store()
        let (scratch, url) = try scratchFile(Array("ours".utf8))
        let created = try store.create(parent: .rootContainer, name: "f.txt", contents: .file(url))
        try remote.write("f.txt", Array("theirs, written by another client".utf8))
        let current = try store.item(created.identifier)
        #expect(current.version.contentVersion != created.version.contentVersion)

        #expect(throws: RemoteError.conflict(created.identifier, current: current.version)) {
            try store.modify(created.identifier, baseVersion: created.version.contentVersion, contentsURL: url)
        }
        #expect(throws: RemoteError.conflict(created.identifier, current: current.version)) {
            try store.delete(created.identifier, baseVersion: created.version.contentVersion)
        }
        #expect(try remote.read("f.txt") == Array("theirs, written by another client".utf8))
        // A name taken: create and move refuse to overwrite.
        #expect {
            try store.create(parent: .rootContainer, name: "f.txt", contents: .file(url))
        } throws: { error in
            if case RemoteError.conflict(let id, _) = error { return id == created.identifier }
            return false
        }
        let other = try store.create(parent: .rootContainer, name: "g.txt", contents: .file(url))
        #expect {
            try store.move(other.identifier, toParent: .rootContainer, newName: "f.txt")
        } throws: { error in
            if case RemoteError.conflict = error { return true }
            return false
        }
        #expect(try remote.read("f.txt") == Array("theirs, written by another client".utf8))
        #expect(try remote.read("g.txt") == Array("ours".utf8))
        // A directory that is not empty is not deleted.
        _ = try store.create(parent: .rootContainer, name: "d", contents: .directory)
        _ = try store.create(parent: ItemIdentifier("d"), name: "inside", contents: .file(url))
        #expect {
            try store.delete(ItemIdentifier("d"), baseVersion: nil)
        } throws: { error in
            if case RemoteError.conflict = error { return true }
            return false
        }
        #expect(try remote.read("d/inside") == Array("ours".utf8))
        _ = scratch
    }

    @Test("names with spaces, '#', '%', '?' and the NFC and NFD spellings of one word are distinct items that round-trip exactly",
          arguments: RemoteKind.available)
    func awkwardNames(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        let store = try remote.store()
        let nfc = "caf\u{E9}"
        let nfd = "cafe\u{301}"
        let names = ["a b.txt", "hash#tag", "100%", "what?", "%41", nfc, nfd, "sp ace dir"]
        var created: [ItemIdentifier: [UInt8]] = [:]
        let scratch = try TempDirectory(prefix: "mamfs-contract")
        for (index, name) in names.enumerated() {
            let url = URL(fileURLWithPath: scratch.file("c\(index)"))
            let bytes = Array("contents of \(index)".utf8)
            try Data(bytes).write(to: url)
            let item = try store.create(parent: .rootContainer, name: name, contents: .file(url))
            #expect(Array(item.filename.utf8) == Array(name.utf8))
            created[item.identifier] = bytes
        }
        #expect(created.count == names.count)
        let listed = try store.enumerate(container: .rootContainer)
        #expect(Set(listed.map { Array($0.filename.utf8) }) == Set(names.map { Array($0.utf8) }))
        let onDisk = (try FileManager.default.contentsOfDirectory(atPath: remote.directory)).map { Array($0.utf8) }
        #expect(Set(onDisk) == Set(names.map { Array($0.utf8) }))
        for item in listed {
            let (_, bytes) = try readThrough(store, item.identifier)
            #expect(bytes == created[item.identifier], "\(item.filename)")
        }
        let folder = try store.create(parent: .rootContainer, name: "dir #1 ?", contents: .directory)
        let inside = try store.move(ItemIdentifier(nfd), toParent: folder.identifier, newName: nfd + " %20")
        #expect(Array(inside.identifier.rawValue.utf8) == Array("dir #1 ?/\(nfd) %20".utf8))
        #expect(try remote.read("dir #1 ?/\(nfd) %20") == created[ItemIdentifier(nfd)])
        #expect(try store.item(ItemIdentifier(nfc)).filename.utf8.elementsEqual(nfc.utf8))
    }

    @Test("a directory of 1,000 entries is listed whole", arguments: RemoteKind.available)
    func thousandEntries(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        try remote.makeDirectory("many")
        for index in 0..<1000 { try remote.write("many/file-\(index)", Array("\(index)".utf8)) }
        let store = try remote.store()
        let items = try store.enumerate(container: ItemIdentifier("many"))
        #expect(items.count == 1000)
        #expect(Set(items.map(\.filename)) == Set((0..<1000).map { "file-\($0)" }))
        #expect(items.allSatisfy { $0.parentIdentifier == ItemIdentifier("many") && $0.size == Int64($0.filename.count - 5) })
    }

    @Test("a 64 MiB file is streamed up and down with bounded memory and the same bytes", arguments: RemoteKind.available)
    func largeFileStreams(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        let store = try remote.store()
        let scratch = try TempDirectory(prefix: "mamfs-contract")
        let source = scratch.file("big")
        let size = 64 << 20 + 12_345
        try writePseudoRandom(source, size: size)
        let before = residentBytes()
        resetPeakResident()
        let item = try store.create(parent: .rootContainer, name: "big.bin", contents: .file(URL(fileURLWithPath: source)))
        let copy = scratch.file("copy")
        try Data().write(to: URL(fileURLWithPath: copy))
        let read = try store.readContents(of: item.identifier, into: URL(fileURLWithPath: copy))
        let growth = peakResidentBytes() - before
        #expect(item.size == Int64(size) && read.size == Int64(size))
        #expect(try sameBytes(source, remote.directory + "/big.bin"), "the remote file differs from the source")
        #expect(try sameBytes(source, copy), "the downloaded file differs from the source")
        #expect(growth < 32 << 20, "the resident memory's peak was \(growth) bytes above its start during the transfers")
    }

    @Test("an unreachable remote is .unreachable and changes nothing; once back, the same store works again",
          arguments: RemoteKind.available)
    func unreachableThenBack(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        let store = try remote.store()
        let (scratch, url) = try scratchFile(Array("kept".utf8))
        let item = try store.create(parent: .rootContainer, name: "kept.txt", contents: .file(url))
        try remote.takeDown()
        for attempt in [
            { _ = try store.enumerate(container: .rootContainer) },
            { _ = try store.item(item.identifier) },
            { _ = try store.create(parent: .rootContainer, name: "new.txt", contents: .file(url)) },
            { _ = try store.modify(item.identifier, baseVersion: item.version.contentVersion, contentsURL: url) },
        ] as [() throws -> Void] {
            #expect {
                try attempt()
            } throws: { error in
                if case RemoteError.unreachable = error { return true }
                return false
            }
        }
        try remote.bringUp()
        #expect(try store.enumerate(container: .rootContainer).map(\.filename) == ["kept.txt"])
        #expect(try readThrough(store, item.identifier).1 == Array("kept".utf8))
        _ = scratch
    }

    @Test("a directory moved on the remote while the tree is listed: the walk starts again, so its files are listed at their new place, none missing",
          arguments: RemoteKind.available)
    func treeListedAgainAfterAMove(kind: RemoteKind) throws {
        let remote = try RemoteHarness(kind)
        try remote.write("d/a.txt", Array("a".utf8))
        try remote.write("d/b.txt", Array("b".utf8))
        try remote.write("top.txt", Array("top".utf8))
        let store = MovingDuringListing(try remote.store(), listing: ItemIdentifier("d")) {
            rename(remote.directory + "/d", remote.directory + "/e")
        }
        let items = try store.enumerateTree()
        #expect(store.moved)
        #expect(Set(items.map(\.identifier.rawValue)) == ["e", "e/a.txt", "e/b.txt", "top.txt"], "\(items.map(\.identifier))")
    }

    // MARK: Helpers

    private func writePseudoRandom(_ path: String, size: Int) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw MAMError.fromErrno(path) }
        defer { close(fd) }
        var generator = SplitMix64(seed: 0x5eed)
        var words = [UInt64](repeating: 0, count: 1 << 17)
        var left = size
        while left > 0 {
            for i in words.indices { words[i] = generator.next() }
            let n = min(left, words.count * 8)
            let written = words.withUnsafeBytes { write(fd, $0.baseAddress, n) }
            guard written == n else { throw MAMError.fromErrno("write \(path)") }
            left -= n
        }
    }

    private func sameBytes(_ a: String, _ b: String) throws -> Bool {
        let fa = open(a, O_RDONLY), fb = open(b, O_RDONLY)
        defer { if fa >= 0 { close(fa) }; if fb >= 0 { close(fb) } }
        guard fa >= 0, fb >= 0 else { throw MAMError.fromErrno("open") }
        var ba = [UInt8](repeating: 0, count: 1 << 20), bb = ba
        while true {
            let na = read(fa, &ba, ba.count), nb = read(fb, &bb, bb.count)
            guard na == nb, na >= 0 else { return false }
            if na == 0 { return true }
            if ba[0..<na] != bb[0..<nb] { return false }
        }
    }

    /// VmRSS of this process in bytes.
    private func residentBytes() -> Int { statusBytes("VmRSS:") }

    /// VmHWM (the peak of VmRSS since the last reset) in bytes: a buffer held for a moment
    /// and freed again shows here, not in VmRSS afterwards.
    private func peakResidentBytes() -> Int { statusBytes("VmHWM:") }

    /// Resets VmHWM to the current VmRSS (proc(5): clear_refs, value 5).
    private func resetPeakResident() {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return }
        _ = write(fd, "5", 1)
        close(fd)
    }

    private func statusBytes(_ field: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
              let kb = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kb * 1024
    }
}

/// A store whose directory `listing` is moved away (by `move`) just before its first listing:
/// the walk has seen it in its parent's listing and finds it gone.
private final class MovingDuringListing: HookedRemote, @unchecked Sendable {
    private let lock = NSLock()
    private let listing: ItemIdentifier
    private let move: () -> Int32
    private var _moved = false
    var moved: Bool { lock.withLock { _moved } }

    init(_ inner: any RemoteStore, listing: ItemIdentifier, move: @escaping () -> Int32) {
        self.listing = listing
        self.move = move
        super.init(inner)
    }

    override func beforeEnumerate(_ container: ItemIdentifier) {
        lock.withLock {
            if container == listing && !_moved { _moved = move() == 0 }
        }
    }
}
