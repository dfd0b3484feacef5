import Foundation
import Glibc
import Testing
@testable import MAMFS
@testable import MAMProtection

/// The inode table on a temp directory: lookup counts, hard links, forget, repointing.
/// O_PATH (glibc declares it only under _GNU_SOURCE).
let pathOnly: Int32 = 0o10000000

@Suite("Inode table")
struct InodeTableTests {
    /// A temp directory with the table over it, removed afterwards.
    final class Directory {
        let path: String
        let table: InodeTable

        init() throws {
            var template = Array("/tmp/mamfs-table-test-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw TestFailure("mkdtemp") }
            path = String(cString: made)
            let fd = open(path, pathOnly | O_DIRECTORY | O_CLOEXEC)
            var st = Glibc.stat()
            guard fd >= 0, fstat(fd, &st) == 0 else { throw TestFailure("open \(path)") }
            table = InodeTable(rootFD: fd, rootStat: st, descriptorBudget: 64)
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }

        func file(_ name: String) throws -> stat {
            guard FileManager.default.createFile(atPath: path + "/" + name, contents: Data(name.utf8)) else { throw TestFailure("create \(name)") }
            return try self.stat(name)
        }

        func stat(_ name: String) throws -> Glibc.stat {
            var st = Glibc.stat()
            guard lstat(path + "/" + name, &st) == 0 else { throw TestFailure("stat \(name)") }
            return st
        }

        /// `table.acquire` as a lookup of `name` at the root does it.
        func acquire(_ name: String) throws -> Inode {
            let st = try self.stat(name)
            let fd = openat(table.root.fd, name, pathOnly | O_NOFOLLOW | O_CLOEXEC)
            return DescriptorCache.withPins { table.acquire(st, fd: fd, parent: table.root, name: name) }
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test("Each acquire counts one lookup; forget to zero removes the entry from both maps")
    func lookupCounts() throws {
        let d = try Directory()
        let st = try d.file("a")
        let first = try d.acquire("a")
        let second = try d.acquire("a")
        #expect(first === second)
        #expect(first.lookupCount == 2)
        #expect(d.table.acquireExisting(st) === first)
        #expect(first.lookupCount == 3)
        d.table.forget(first.nodeid, count: 2)
        #expect(d.table.inode(first.nodeid) === first)
        d.table.forget(first.nodeid, count: 1)
        #expect(d.table.inode(first.nodeid) == nil)
        #expect(d.table.existing(BackingKey(st)) == nil)
        #expect(d.table.acquireExisting(st) == nil)
    }

    @Test("Forgetting more than counted removes the entry; the root is never forgotten")
    func forgetBounds() throws {
        let d = try Directory()
        _ = try d.file("a")
        let inode = try d.acquire("a")
        d.table.forget(inode.nodeid, count: 10)
        #expect(d.table.inode(inode.nodeid) == nil)
        d.table.forget(d.table.root.nodeid, count: 10)
        #expect(d.table.inode(d.table.root.nodeid) === d.table.root)
        #expect(d.table.root.nodeid == 1)
    }

    @Test("Hard links share one entry, keyed by (st_dev, st_ino)")
    func hardLinksShareAnEntry() throws {
        let d = try Directory()
        _ = try d.file("a")
        #expect(link(d.path + "/a", d.path + "/b") == 0)
        let a = try d.acquire("a")
        let b = try d.acquire("b")
        #expect(a === b)
        #expect(a.lookupCount == 2)
        #expect(a.key == BackingKey(try d.stat("b")))
        #expect(d.table.all.count == 2)
    }

    @Test("Node ids are not reused: an object found again after its entry went gets a new one")
    func nodeidsAreNotReused() throws {
        let d = try Directory()
        _ = try d.file("a")
        _ = try d.file("b")
        let a = try d.acquire("a")
        let firstId = a.nodeid
        d.table.forget(firstId, count: 1)
        let again = try d.acquire("a")
        #expect(again.nodeid != firstId)
        #expect(again.nodeid > firstId)
        let b = try d.acquire("b")
        #expect(Set([firstId, again.nodeid, b.nodeid]).count == 3)
    }

    @Test("Repointing moves an entry to a new backing object, unless another entry has it")
    func repointing() throws {
        let d = try Directory()
        let old = try d.file("a")
        let replacement = try d.file("a.new")
        let inode = try d.acquire("a")
        inode.storeHeader(nil, stamp: old.st_ctim)
        #expect(inode.hasCachedHeader)
        let fd = open(d.path + "/a.new", pathOnly | O_CLOEXEC)
        #expect(d.table.repoint(inode, to: replacement, fd: fd))
        #expect(inode.key == BackingKey(replacement))
        #expect(!inode.hasCachedHeader)
        #expect(d.table.existing(BackingKey(replacement)) === inode)
        #expect(d.table.existing(BackingKey(old)) == nil)

        let other = try d.file("b")
        let otherEntry = try d.acquire("b")
        let second = open(d.path + "/b", pathOnly | O_CLOEXEC)
        #expect(!d.table.repoint(inode, to: other, fd: second))
        close(second)
        #expect(inode.key == BackingKey(replacement))
        #expect(d.table.existing(BackingKey(other)) === otherEntry)
    }

    @Test("The cached header is trusted while its ctime matches or a handle is open; a changed header drops the key")
    func contentStateCache() throws {
        let d = try Directory()
        let st = try d.file("a")
        let inode = try d.acquire("a")
        #expect(!inode.currentContent(ctime: st.st_ctim).isKnown)
        inode.storeHeader(nil, key: nil, generation: 3, stamp: st.st_ctim)
        #expect(inode.currentContent(ctime: st.st_ctim).isKnown)
        var later = st.st_ctim
        later.tv_nsec += 1
        #expect(!inode.currentContent(ctime: later).isKnown)
        inode.adjustOpenCount(1)
        #expect(inode.currentContent(ctime: later).isKnown)
        inode.adjustOpenCount(-1)
        inode.invalidateCachedHeader()
        #expect(!inode.currentContent(ctime: st.st_ctim).isKnown)

        let state = ContentState.known(header: nil, stamp: st.st_ctim, key: nil, keyGeneration: 5)
        guard case .known(_, _, _, let kept) = state.storing(header: nil, stamp: later) else { Issue.record("unknown"); return }
        #expect(kept == 5)
        #expect(!ContentState.unknown.storing(key: nil, generation: 9).isKnown)
        guard case .known(_, _, _, let dropped) = state.storing(header: nil, stamp: later).storing(key: nil, generation: 7) else {
            Issue.record("unknown")
            return
        }
        #expect(dropped == 7)
    }

    @Test("The cipher kept with an entry's file key goes with its last handle; the key stays")
    func lastHandleDropsTheKeptCipher() throws {
        let d = try Directory()
        _ = try d.file("a")
        let inode = try d.acquire("a")
        let key = try SymmetricKey.random()
        inode.storeHeader(nil, key: key, generation: 1, stamp: timespec())
        inode.adjustOpenCount(1)
        inode.adjustOpenCount(1)
        BlockCipher.keep(try BlockCipher.take(key: key, fileId: [UInt8](repeating: 7, count: 16)), with: key)
        inode.adjustOpenCount(-1)
        #expect(key.keepsBlockCipher, "a handle is still open")
        inode.adjustOpenCount(-1)
        #expect(!key.keepsBlockCipher)
        guard case .known(_, _, let kept?, _) = inode.contentState else { throw TestFailure("the key went too") }
        #expect(kept === key)
    }

    @Test("A request scope pins each entry once, in the outermost level that read it, past the linear limit too")
    func pinScopesPinEachEntryOnce() throws {
        let d = try Directory()
        let count = 2 * PinScope.linearLimit + 5
        let inodes = try (0..<count).map { index -> Inode in
            _ = try d.file("p\(index)")
            return try d.acquire("p\(index)")
        }
        func pins(_ inode: Inode) -> Int { inode.slot.pins }
        try DescriptorCache.withPins {
            // The first half, read twice each: pinned once.
            for inode in inodes.prefix(count / 2) { _ = try inode.descriptor(); _ = try inode.descriptor() }
            #expect(inodes.prefix(count / 2).allSatisfy { pins($0) == 1 })
            #expect(PinScope.current().count == count / 2)
            try DescriptorCache.withPins {
                // An inner level reading every entry pins only those the outer one has not.
                for inode in inodes.reversed() { _ = try inode.descriptor() }
                #expect(inodes.allSatisfy { pins($0) == 1 })
                #expect(PinScope.current().count == count)
            }
            // Leaving the inner level unpins what it pinned, not what the outer level holds.
            #expect(inodes.prefix(count / 2).allSatisfy { pins($0) == 1 })
            #expect(inodes.suffix(count - count / 2).allSatisfy { pins($0) == 0 })
            #expect(PinScope.current().count == count / 2)
            // Read again at the outer level: pinned again, once.
            for inode in inodes.suffix(count - count / 2) { _ = try inode.descriptor() }
            #expect(inodes.allSatisfy { pins($0) == 1 })
        }
        #expect(inodes.allSatisfy { pins($0) == 0 })
        #expect(PinScope.current().count == 0)
        // An outer level below the limit, an inner one that takes the scope past it and is
        // left again: the outer entries stay pinned once, new ones are pinned once each.
        try DescriptorCache.withPins {
            for inode in inodes.prefix(10) { _ = try inode.descriptor() }
            try DescriptorCache.withPins {
                for inode in inodes[10..<20] { _ = try inode.descriptor(); _ = try inode.descriptor() }
                #expect(PinScope.current().count == 20)
            }
            #expect(PinScope.current().count == 10)
            for inode in inodes.prefix(10) { _ = try inode.descriptor() }
            #expect(inodes.prefix(10).allSatisfy { pins($0) == 1 })
            #expect(inodes[10..<20].allSatisfy { pins($0) == 0 })
            for inode in inodes[10..<15] { _ = try inode.descriptor(); _ = try inode.descriptor() }
            #expect(inodes.prefix(15).allSatisfy { pins($0) == 1 })
            #expect(PinScope.current().count == 15)
        }
        #expect(inodes.allSatisfy { pins($0) == 0 })
        // Below the limit again, a fresh scope still pins once per entry.
        try DescriptorCache.withPins {
            for inode in inodes.prefix(3) { _ = try inode.descriptor(); _ = try inode.descriptor() }
            #expect(inodes.prefix(3).allSatisfy { pins($0) == 1 })
        }
        #expect(inodes.allSatisfy { pins($0) == 0 })
    }
}
