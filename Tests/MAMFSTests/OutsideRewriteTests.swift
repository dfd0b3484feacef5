import Foundation
import Glibc
import Testing
@testable import MAMFS
@testable import MAMProtection

/// A backing file rewritten in place behind the mount (another program writing the backing
/// directory) while a handle on it is open: a new open reads the file as it is now, its
/// header included, not the header the entry cached for the handle already open.
@Suite("Backing file rewritten in place while a handle is open")
struct OutsideRewriteTests {
    /// Creates `name` through the core with `bytes` and closes it.
    static func make(_ f: OverlayCoreFixture, _ name: String, _ bytes: [UInt8]) throws {
        let created = try f.request { try f.fs.create(parent: f.root, name: name, mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        _ = try bytes.withUnsafeBytes { data in try f.request { try f.fs.write(created.handle, data, offset: 0, writepage: false, caller: f.caller) } }
        f.fs.release(created.handle, caller: f.caller)
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
        let nodeid = try f.request { try f.fs.lookup(parent: f.root, name: name, caller: f.caller) }.nodeid
        return try f.request { try f.fs.open(nodeid, flags: O_RDONLY, caller: f.caller) }
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
        // The handle open before the rewrite now reads the file as it is, too.
        #expect(try f.read(old) == second)
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
}
