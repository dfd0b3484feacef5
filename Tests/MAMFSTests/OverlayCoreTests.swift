import Foundation
import Glibc
import Testing
import MAMSystem
@testable import MAMFS
@testable import MAMProtection

/// The overlay's core called directly over a temp backing directory: what the FUSE front end
/// gets back for each request, without a mount.
@Suite("Overlay core without FUSE")
struct OverlayCoreTests {
    @Test("Lookups and forgets balance: the entry stays while counted and goes at zero")
    func lookupAndForgetBalance() throws {
        let f = try OverlayCoreFixture()
        #expect(FileManager.default.createFile(atPath: f.backing + "/a", contents: Data("x".utf8)))
        let first = try f.request { try f.fs.lookup(parent: f.root, name: "a", caller: f.caller) }
        let second = try f.request { try f.fs.lookup(parent: f.root, name: "a", caller: f.caller) }
        #expect(first.nodeid == second.nodeid)
        #expect(f.fs.table.inode(first.nodeid)?.lookupCount == 2)
        f.fs.forget(first.nodeid, count: 1)
        #expect(f.fs.table.inode(first.nodeid)?.lookupCount == 1)
        f.fs.forget(first.nodeid, count: 1)
        #expect(f.fs.table.inode(first.nodeid) == nil)
        #expect(f.errno { _ = try f.fs.getattr(first.nodeid, caller: f.caller) } == ESTALE)
    }

    @Test("A missing name answers ENOENT and registers nothing")
    func lookupOfMissingName() throws {
        let f = try OverlayCoreFixture()
        #expect(f.errno { _ = try f.fs.lookup(parent: f.root, name: "missing", caller: f.caller) } == ENOENT)
        #expect(f.fs.table.all.count == 1)
    }

    @Test("create, write, release, open, read on an encrypted owner: the backing bytes are not the plaintext")
    func createWriteReadRoundTrip() throws {
        let f = try OverlayCoreFixture()
        let plaintext = Array("the quick brown fox jumps over the lazy dog, twice: the quick brown fox".utf8)
        let created = try f.request { try f.fs.create(parent: f.root, name: "secret.txt", mode: 0o644, flags: O_CREAT | O_WRONLY, caller: f.caller) }
        #expect(created.made != nil)
        let written = try plaintext.withUnsafeBytes { data in
            try f.request { try f.fs.write(created.handle, data, offset: 0, writepage: false, caller: f.caller) }
        }
        #expect(written == plaintext.count)
        f.fs.release(created.handle, caller: f.caller)

        let stored = try f.backingBytes("secret.txt")
        #expect(stored.count > plaintext.count)
        #expect(stored.firstRange(of: plaintext[0..<16]) == nil)
        let header = try #require(try ProtectedFileHeader.read(fd: open(f.backing + "/secret.txt", O_RDONLY)))
        #expect(header.isEncrypted)
        #expect(header.owner == OverlayCoreFixture.account)

        let handle = try f.request { try f.fs.open(created.entry.nodeid, flags: O_RDONLY, caller: f.caller) }
        #expect(try f.read(handle) == plaintext)
        f.fs.release(handle, caller: f.caller)
        let attributes = try f.request { try f.fs.getattr(created.entry.nodeid, caller: f.caller) }
        #expect(attributes.st_size == plaintext.count)
        #expect((attributes.st_mode & S_IFMT) == S_IFREG)
    }

    @Test("repoint after a rewrite takes only a file with the old one's owner, group and mode: another file renamed there is not followed")
    func repointRefusesAForeignFile() throws {
        let f = try OverlayCoreFixture()
        let created = try f.request { try f.fs.create(parent: f.root, name: "mine", mode: 0o644, flags: O_CREAT | O_WRONLY, caller: f.caller) }
        f.fs.release(created.handle, caller: f.caller)
        let inode = try #require(f.fs.table.inode(created.entry.nodeid))
        let key = inode.key
        // Another user's file put under the name directly in the backing directory.
        let foreign = f.backing + "/foreign"
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: foreign))
        #expect(chown(foreign, 65534, 65534) == 0 && chmod(foreign, 0o600) == 0)
        #expect(rename(foreign, f.backing + "/mine") == 0)
        try f.request { try inode.contentLock.writing { f.fs.repoint(inode, toPath: f.backing + "/mine", handles: .follow) } }
        #expect(inode.key == key, "the entry now points at another user's file")
        // A file as a rewrite leaves it (the old one's owner, group and mode) is followed.
        let old = try SystemCall.stat(fd: inode.descriptor())
        let copy = f.backing + "/copy"
        try Data("rewritten".utf8).write(to: URL(fileURLWithPath: copy))
        #expect(chown(copy, old.st_uid, old.st_gid) == 0 && chmod(copy, old.st_mode & 0o7777) == 0)
        #expect(rename(copy, f.backing + "/mine") == 0)
        try f.request { try inode.contentLock.writing { f.fs.repoint(inode, toPath: f.backing + "/mine", handles: .follow) } }
        #expect(inode.key != key)
        var st = stat()
        #expect(stat(f.backing + "/mine", &st) == 0 && inode.key == BackingKey(st))
    }

    @Test("An unmanaged mount writes plain files with a header; getattr answers the plaintext size")
    func plainOwnerSize() throws {
        let f = try OverlayCoreFixture(managed: false)
        let created = try f.request { try f.fs.create(parent: f.root, name: "plain.txt", mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        let bytes = Array(repeating: UInt8(ascii: "z"), count: 5000)
        _ = try bytes.withUnsafeBytes { try f.fs.write(created.handle, $0, offset: 0, writepage: false, caller: f.caller) }
        f.fs.release(created.handle, caller: f.caller)
        let stored = try f.backingBytes("plain.txt")
        #expect(stored.count > bytes.count)
        #expect(Array(stored.suffix(bytes.count)) == bytes)
        #expect(try f.request { try f.fs.getattr(created.entry.nodeid, caller: f.caller) }.st_size == 5000)
    }

    @Test("A truncated encrypted tail reports the whole blocks' plaintext size")
    func tornTailSize() throws {
        let f = try OverlayCoreFixture()
        let created = try f.request { try f.fs.create(parent: f.root, name: "torn", mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        let block = BlockLayout.plaintextBlockSize
        let bytes = Array(repeating: UInt8(7), count: 2 * block + 100)
        _ = try bytes.withUnsafeBytes { try f.fs.write(created.handle, $0, offset: 0, writepage: false, caller: f.caller) }
        f.fs.release(created.handle, caller: f.caller)
        // Cut the third block to 10 stored bytes (less than its nonce and tag): only the two
        // whole blocks count.
        let path = f.backing + "/torn"
        var st = stat()
        #expect(lstat(path, &st) == 0)
        let tail = off_t(st.st_size) - off_t(100 + BlockLayout.overhead)
        #expect(Glibc.truncate(path, tail + 10) == 0)
        let whole = try f.request { try f.fs.getattr(created.entry.nodeid, caller: f.caller) }
        #expect(whole.st_size == 2 * block)
        // Cut to 60 stored bytes: the 60 - overhead plaintext bytes of the cut block count too.
        #expect(Glibc.truncate(path, tail + 60) == 0)
        let cut = try f.request { try f.fs.getattr(created.entry.nodeid, caller: f.caller) }
        #expect(cut.st_size == 2 * block + 60 - BlockLayout.overhead)
    }

    @Test("unlink and rename answer the backing errno: ENOENT, EEXIST with RENAME_NOREPLACE, ENOTEMPTY, EINVAL")
    func namespaceErrors() throws {
        let f = try OverlayCoreFixture(managed: false)
        #expect(mkdir(f.backing + "/full", 0o755) == 0)
        #expect(FileManager.default.createFile(atPath: f.backing + "/full/child", contents: Data()))
        #expect(FileManager.default.createFile(atPath: f.backing + "/one", contents: Data("1".utf8)))
        #expect(FileManager.default.createFile(atPath: f.backing + "/two", contents: Data("2".utf8)))
        let root = f.root
        #expect(f.errno { try f.fs.unlink(parent: root, name: "missing", directory: false, caller: f.caller) } == ENOENT)
        #expect(f.errno { try f.fs.unlink(parent: root, name: "full", directory: true, caller: f.caller) } == ENOTEMPTY)
        #expect(f.errno {
            try f.fs.rename(parent: root, name: "one", newParent: root, newName: "two", flags: 1 /* RENAME_NOREPLACE */, caller: f.caller)
        } == EEXIST)
        #expect(f.errno { try f.fs.rename(parent: root, name: "nothing", newParent: root, newName: "x", flags: 0, caller: f.caller) } == ENOENT)
        #expect(f.errno { try f.fs.rename(parent: root, name: "one", newParent: root, newName: "x", flags: 0x80, caller: f.caller) } == EINVAL)
        #expect(try f.backingBytes("two") == Array("2".utf8))

        #expect(f.errno { try f.fs.rename(parent: root, name: "one", newParent: root, newName: "two", flags: 0, caller: f.caller) } == 0)
        #expect(try f.backingBytes("two") == Array("1".utf8))
        #expect(f.errno { try f.fs.unlink(parent: root, name: "two", directory: false, caller: f.caller) } == 0)
        #expect(access(f.backing + "/two", F_OK) != 0)
    }

    @Test("A made object the kernel did not take is removed again and its lookup forgotten")
    func abandonedMkdirIsRemoved() throws {
        let f = try OverlayCoreFixture()
        let made = try f.request { try f.fs.mkdir(parent: f.root, name: "d", mode: 0o755, caller: f.caller) }
        #expect(access(f.backing + "/d", F_OK) == 0)
        DescriptorCache.withPins { f.fs.abandon(made) }
        #expect(access(f.backing + "/d", F_OK) != 0)
        #expect(f.fs.table.inode(made.entry.nodeid) == nil)
    }

    @Test("The provider's metadata name at the root answers ENOENT to lookup and EPERM to mkdir; a plain mount shows it")
    func reservedProviderName() throws {
        let provider = try OverlayCoreFixture(provider: .nonReplicated)
        #expect(provider.errno { _ = try provider.fs.lookup(parent: provider.root, name: ".mamfs-provider", caller: provider.caller) } == ENOENT)
        #expect(provider.errno { _ = try provider.fs.mkdir(parent: provider.root, name: ".mamfs-provider", mode: 0o755, caller: provider.caller) } == EPERM)
        let listing = try provider.request { () throws -> [String] in
            let dir = try provider.fs.opendir(provider.root, caller: provider.caller)
            var page = try provider.fs.readdir(dir, offset: 0, plus: false, caller: provider.caller)
            var names: [String] = []
            while let item = page.next() { names.append(String(decoding: item.name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
            return names
        }
        #expect(!listing.contains(".mamfs-provider"))

        let plain = try OverlayCoreFixture()
        #expect(mkdir(plain.backing + "/.mamfs-provider", 0o755) == 0)
        #expect(plain.errno { _ = try plain.fs.lookup(parent: plain.root, name: ".mamfs-provider", caller: plain.caller) } == 0)
    }

    @Test("readdirplus counts one lookup per listed entry; . and .. are not looked up")
    func readdirPlusCounts() throws {
        let f = try OverlayCoreFixture(managed: false)
        for name in ["a", "b", "c"] { #expect(FileManager.default.createFile(atPath: f.backing + "/" + name, contents: Data())) }
        let items = try f.request { () throws -> [DirectoryPage.Item] in
            let dir = try f.fs.opendir(f.root, caller: f.caller)
            var page = try f.fs.readdir(dir, offset: 0, plus: true, caller: f.caller)
            var items: [DirectoryPage.Item] = []
            while let item = page.next() { items.append(item) }
            return items
        }
        #expect(items.count == 5)
        #expect(items.filter { $0.entry != nil }.count == 3)
        for item in items { if let entry = item.entry { #expect(f.fs.table.inode(entry.nodeid)?.lookupCount == 1) } }
    }
}
