import Foundation
import Glibc
import Testing
@testable import MAMFS
@testable import MAMProtection

/// A backing file rewritten in place behind the mount (another program writing the backing
/// directory) while a handle on it is open: a new open reads the file as it is now, its
/// header included, not the header the entry cached for the handle already open; the handles
/// opened before are stale (EIO) once a new header is seen, and never write through the old
/// one; the mount's own changes and a ctime moved without a new header leave them working.
@Suite("Backing file rewritten in place while a handle is open")
struct OutsideRewriteTests {
    /// Creates `name` through the core with `bytes` and closes it. - Returns: its nodeid.
    @discardableResult
    static func make(_ f: OverlayCoreFixture, _ name: String, _ bytes: [UInt8]) throws -> UInt64 {
        let created = try f.request { try f.fs.create(parent: f.root, name: name, mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        _ = try bytes.withUnsafeBytes { data in try f.request { try f.fs.write(created.handle, data, offset: 0, writepage: false, caller: f.caller) } }
        f.fs.release(created.handle, caller: f.caller)
        return created.entry.nodeid
    }

    /// Overwrites the backing file `name` in place (same inode) with `bytes`.
    static func rewriteInPlace(_ f: OverlayCoreFixture, _ name: String, with bytes: [UInt8]) throws {
        let fd = Glibc.open(f.backing + "/" + name, O_WRONLY | O_TRUNC)
        try #require(fd >= 0)
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        try #require(written == bytes.count)
    }

    /// Opens `name` read-only through the core.
    static func open(_ f: OverlayCoreFixture, _ name: String) throws -> OpenFile {
        try open(f, try f.request { try f.fs.lookup(parent: f.root, name: name, caller: f.caller) }.nodeid)
    }

    /// Opens `nodeid` through the core with `flags`.
    static func open(_ f: OverlayCoreFixture, _ nodeid: UInt64, _ flags: Int32 = O_RDONLY) throws -> OpenFile {
        try f.request { try f.fs.open(nodeid, flags: flags, caller: f.caller) }
    }

    /// Sets the size of `nodeid` through the core: through `handle`, or by name without one.
    static func setSize(_ f: OverlayCoreFixture, _ nodeid: UInt64, _ size: Int64, handle: OpenFile? = nil) throws {
        _ = try f.request { try f.fs.setattr(nodeid, AttributeChanges(size: size), handle: handle, caller: f.caller) }
    }

    @Test("an encrypted file rewritten with another encrypted file's bytes: a new open reads that file's plaintext")
    func encryptedRewrittenWithAnotherFile() throws {
        let f = try OverlayCoreFixture()
        let first = Array(repeating: UInt8(ascii: "a"), count: 5_000)
        let second = (0..<7_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try Self.make(f, "a", first)
        try Self.make(f, "b", second)
        let old = try Self.open(f, "a")
        defer { f.fs.release(old, caller: f.caller) }
        #expect(try f.read(old) == first)
        try Self.rewriteInPlace(f, "a", with: try f.backingBytes("b"))
        let new = try Self.open(f, "a")
        defer { f.fs.release(new, caller: f.caller) }
        #expect(try f.read(new) == second, "a new open used the header cached for the handle already open")
        // The handle open before the rewrite is stale: EIO, not the new file through it.
        #expect(f.errno { _ = try f.read(old) } == EIO)
        #expect(try f.read(new) == second)
    }

    @Test("a plain-tagged file rewritten with untagged bytes: a new open reads those bytes, not an offset slice of them")
    func plainTaggedRewrittenUntagged() throws {
        let f = try OverlayCoreFixture(policy: Policy(fileEncryptionRequired: false))
        try Self.make(f, "p", Array(repeating: UInt8(ascii: "p"), count: 3_000))
        let old = try Self.open(f, "p")
        defer { f.fs.release(old, caller: f.caller) }
        #expect(try f.read(old).count == 3_000)
        let outside = (0..<4_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        try Self.rewriteInPlace(f, "p", with: outside)
        let new = try Self.open(f, "p")
        defer { f.fs.release(new, caller: f.caller) }
        #expect(try f.read(new) == outside, "a new open read the untagged file through the old plain-tagged header")
        let st = try f.request { try f.fs.getattr(new.inode.nodeid, caller: f.caller) }
        #expect(st.st_size == outside.count)
    }

    /// Writes `bytes` at `offset` through `handle`.
    static func write(_ f: OverlayCoreFixture, _ handle: OpenFile, _ bytes: [UInt8], at offset: Int) throws {
        _ = try bytes.withUnsafeBytes { data in try f.request { try f.fs.write(handle, data, offset: offset, writepage: false, caller: f.caller) } }
    }

    @Test("an old handle's write or read after a rewrite with no open since: EIO, and the bytes another program wrote stay",
          arguments: [0, 9, 129, 129 + 4_124, 4_000])
    func oldHandleAfterRewrite(untaggedLength: Int) throws {
        let f = try OverlayCoreFixture()
        let nodeid = try Self.make(f, "w", Array(repeating: UInt8(ascii: "w"), count: 12_000))
        let old = try Self.open(f, nodeid, O_RDWR | O_APPEND)
        defer { f.fs.release(old, caller: f.caller) }
        #expect(try f.read(old).count == 12_000)
        let outside = (0..<untaggedLength).map { UInt8(truncatingIfNeeded: $0 % 26 + 97) }
        try Self.rewriteInPlace(f, "w", with: outside)
        #expect(f.errno { try Self.write(f, old, Array("APPENDED".utf8), at: 0) } == EIO)
        #expect(f.errno { try Self.write(f, old, Array("ZZZZ".utf8), at: 5) } == EIO)
        #expect(f.errno { _ = try f.read(old) } == EIO)
        #expect(f.errno { try Self.setSize(f, nodeid, 3, handle: old) } == EIO)
        #expect(try f.backingBytes("w") == outside, "a stale handle changed the file another program wrote")
        let new = try Self.open(f, "w")
        defer { f.fs.release(new, caller: f.caller) }
        #expect(try f.read(new) == outside)
    }

    @Test("the mount's own writes, truncations and attribute changes through other handles leave a handle working")
    func ownChangesKeepHandles() throws {
        let f = try OverlayCoreFixture()
        let nodeid = try Self.make(f, "m", Array(repeating: UInt8(ascii: "m"), count: 6_000))
        let first = try Self.open(f, nodeid, O_RDWR)
        defer { f.fs.release(first, caller: f.caller) }
        let second = try Self.open(f, nodeid, O_RDWR)
        defer { f.fs.release(second, caller: f.caller) }
        var expected = Array(repeating: UInt8(ascii: "m"), count: 6_000)
        for round in 0..<20 {
            let handle = round % 2 == 0 ? first : second
            let piece = Array(repeating: UInt8(truncatingIfNeeded: 65 + round), count: 300 + round * 37)
            try Self.write(f, handle, piece, at: expected.count - 100)
            expected = Array(expected[0..<(expected.count - 100)]) + piece
            #expect(try f.read(round % 2 == 0 ? second : first) == expected)
        }
        try Self.setSize(f, nodeid, 5_000, handle: first)
        expected = Array(expected[0..<5_000])
        _ = try f.request { try f.fs.setattr(nodeid, AttributeChanges(mode: 0o600), handle: nil, caller: f.caller) }
        try Self.setSize(f, nodeid, 4_000)
        expected = Array(expected[0..<4_000])
        #expect(try f.read(second) == expected)
        #expect(try f.read(first) == expected)
        // Another program moving the ctime without a new header (chmod, a touch of the backing
        // file) has the header read again, and the handles go on.
        #expect(chmod(f.backing + "/m", 0o640) == 0)
        try Self.write(f, second, Array("tail".utf8), at: 4_000)
        expected += Array("tail".utf8)
        #expect(try f.read(first) == expected)
    }

    @Test("a truncate by name after a rewrite behind the mount cuts the file as it is now, and the old handle is stale")
    func truncateByNameAfterRewrite() throws {
        let f = try OverlayCoreFixture()
        let nodeid = try Self.make(f, "t", Array(repeating: UInt8(ascii: "t"), count: 9_000))
        let old = try Self.open(f, nodeid, O_RDONLY)
        defer { f.fs.release(old, caller: f.caller) }
        #expect(try f.read(old).count == 9_000)
        let outside = Array("untagged bytes written behind the mount".utf8)
        try Self.rewriteInPlace(f, "t", with: outside)
        try Self.setSize(f, nodeid, 8)
        #expect(try f.backingBytes("t") == Array(outside[0..<8]))
        #expect(f.errno { _ = try f.read(old) } == EIO)
    }

    /// Sets the file's owner through the mount (the owner attribute; "" makes it personal).
    static func setOwner(_ f: OverlayCoreFixture, _ nodeid: UInt64, _ owner: String) throws {
        let value = Array(owner.utf8)
        try value.withUnsafeBytes { bytes in
            try f.request { try f.fs.setxattr(nodeid, name: "user.mam.owner", value: bytes, flags: 0, caller: f.caller) }
        }
    }

    @Test("handles that followed an owner change through the mount are stale after a rewrite behind it: no work bytes in plaintext")
    func ownerChangeThenRewrite() throws {
        let f = try OverlayCoreFixture()
        let personal = Array(repeating: Array("personal ".utf8), count: 100).flatMap { $0 }
        let nodeid = try Self.make(f, "o", personal)
        try Self.setOwner(f, nodeid, "")
        let writer = try Self.open(f, nodeid, O_RDWR)
        defer { f.fs.release(writer, caller: f.caller) }
        let reader = try Self.open(f, "o")
        defer { f.fs.release(reader, caller: f.caller) }
        #expect(try f.read(reader) == personal)
        try Self.setOwner(f, nodeid, OverlayCoreFixture.account)
        #expect(try f.backingBytes("o").count > personal.count, "the owner change did not encrypt the file")
        let outside = Array(repeating: Array("sync client bytes\n".utf8), count: 20).flatMap { $0 }
        try Self.rewriteInPlace(f, "o", with: outside)
        #expect(f.errno { try Self.write(f, writer, Array("WORK-SECRET".utf8), at: 0) } == EIO)
        #expect(f.errno { _ = try f.read(reader) } == EIO)
        #expect(try f.backingBytes("o") == outside, "a handle that followed the owner change wrote into the other program's file")
    }

    @Test("a rewrite behind the mount right after one of its writes: the handles opened before are stale")
    func rewriteRightAfterAWrite() throws {
        let f = try OverlayCoreFixture(policy: Policy(fileEncryptionRequired: false))
        let nodeid = try Self.make(f, "g", Array(repeating: UInt8(ascii: "g"), count: 2_000))
        let reader = try Self.open(f, "g")
        defer { f.fs.release(reader, caller: f.caller) }
        let writer = try Self.open(f, nodeid, O_WRONLY)
        defer { f.fs.release(writer, caller: f.caller) }
        try Self.write(f, writer, Array("P".utf8), at: 0)
        let outside = Array(repeating: UInt8(ascii: "x"), count: 500)
        try Self.rewriteInPlace(f, "g", with: outside)
        #expect(f.errno { _ = try f.read(reader) } == EIO, "a rewrite right after the mount's own write went unnoticed")
        #expect(f.errno { try Self.write(f, writer, Array("Q".utf8), at: 1) } == EIO)
        #expect(try f.backingBytes("g") == outside)
    }
}
