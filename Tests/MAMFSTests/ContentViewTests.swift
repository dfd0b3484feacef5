import Foundation
import Glibc
import Testing
@testable import MAMFS
@testable import MAMProtection

/// The plaintext view an entry keeps for the handle its requests come through (`ContentView`):
/// used again until the entry's cached state changes, for that handle only, and never
/// holding a key the state has dropped.
@Suite("Plaintext view kept for a handle")
struct ContentViewTests {
    /// A new encrypted file of `size` bytes and an open read-write handle on it.
    static func openFile(_ f: OverlayCoreFixture, name: String, size: Int = 10_000) throws -> (OpenFile, [UInt8]) {
        let created = try f.request { try f.fs.create(parent: f.root, name: name, mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        _ = try bytes.withUnsafeBytes { data in try f.request { try f.fs.write(created.handle, data, offset: 0, writepage: false, caller: f.caller) } }
        return (created.handle, bytes)
    }

    @Test("a handle's requests share one view until the entry's state changes; then a new one reads the same bytes")
    func viewLastsUntilTheStateChanges() throws {
        let f = try OverlayCoreFixture()
        let (handle, bytes) = try Self.openFile(f, name: "v")
        defer { f.fs.release(handle, caller: f.caller) }
        let inode = handle.inode
        #expect(try f.read(handle) == bytes)
        let first = try #require(inode.view(for: handle), "no view kept after a read")
        #expect(first.hasOwner && first.plainTaggedOwner == nil)
        #expect(try f.read(handle) == bytes)
        #expect(try f.request { try f.fs.content(handle) } === first.content, "the second read made a view of its own")
        // Any change of the cached state drops the view.
        inode.invalidateCachedHeader()
        #expect(inode.view(for: handle) == nil)
        #expect(try f.read(handle) == bytes)
        _ = try f.request { try f.fs.content(handle) }
        let second = try #require(inode.view(for: handle))
        #expect(second.content !== first.content)
        let key = try #require(second.content.fileKey)
        inode.storeFileKey(nil, generation: 0)
        #expect(inode.view(for: handle) == nil, "the view outlived the key the state dropped")
        // The state holds no key now: the next request loads one into the state (a new
        // version), so its view is kept only from the request after.
        #expect(try f.read(handle) == bytes)
        #expect(try f.read(handle) == bytes)
        let third = try #require(inode.view(for: handle))
        #expect(third.content !== second.content)
        #expect(try #require(third.content.fileKey).withUnsafeBytes { a in key.withUnsafeBytes { b in a.elementsEqual(b) } })
    }

    @Test("an entry keeps the view of one handle: another handle's request makes and keeps its own")
    func viewBelongsToItsHandle() throws {
        let f = try OverlayCoreFixture()
        let (writer, bytes) = try Self.openFile(f, name: "w")
        defer { f.fs.release(writer, caller: f.caller) }
        let inode = writer.inode
        #expect(try f.read(writer) == bytes)
        #expect(inode.view(for: writer) != nil)
        let reader = try f.request { try f.fs.open(inode.nodeid, flags: O_RDONLY, caller: f.caller) }
        #expect(reader.serial != writer.serial)
        #expect(inode.view(for: reader) == nil, "a handle got another handle's view")
        #expect(try f.read(reader) == bytes)
        #expect(inode.view(for: reader)?.fd == reader.fd)
        #expect(inode.view(for: writer) == nil)
        f.fs.release(reader, caller: f.caller)
        #expect(inode.hasView == false, "the view outlived its handle's release")
        // Writes through the first handle go on with a view of their own.
        let more: [UInt8] = [1, 2, 3]
        _ = try more.withUnsafeBytes { data in try f.request { try f.fs.write(writer, data, offset: bytes.count, writepage: false, caller: f.caller) } }
        #expect(try f.read(writer) == bytes + more)
    }

    @Test("a plain-tagged file's view names its owner for the encryption check; an unmanaged one names none")
    func viewCarriesTheOwnerChecks() throws {
        let plain = try OverlayCoreFixture(policy: Policy(fileEncryptionRequired: false))
        let (tagged, _) = try Self.openFile(plain, name: "p", size: 10)
        defer { plain.fs.release(tagged, caller: plain.caller) }
        _ = try plain.request { try plain.fs.content(tagged) }
        let view = try #require(tagged.inode.view(for: tagged))
        #expect(view.hasOwner && view.plainTaggedOwner == OverlayCoreFixture.account)
        #expect(view.content.header?.isEncrypted == false)

        let unmanaged = try OverlayCoreFixture(managed: false)
        let (untagged, _) = try Self.openFile(unmanaged, name: "u", size: 10)
        defer { unmanaged.fs.release(untagged, caller: unmanaged.caller) }
        _ = try unmanaged.request { try unmanaged.fs.content(untagged) }
        let none = try #require(untagged.inode.view(for: untagged))
        #expect(!none.hasOwner && none.plainTaggedOwner == nil)
        #expect(none.content.header?.owner ?? "" == "")
    }
}
