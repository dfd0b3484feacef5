import Foundation
import Glibc
import Testing
@testable import MAMFS
@testable import MAMProtection
import MAMSystem

/// Writing the mamfs attributes through a mount: setxattr(2)'s XATTR_CREATE and XATTR_REPLACE
/// hold as for a stored attribute (it exists when getxattr reads a value); a refused call
/// changes nothing (no owner change, no decryption, no file of a refused directory change
/// rewritten); the file provider's attributes are hidden on a plain mount too.
@Suite("Writing user.mam.* through the mount: flags, refused changes, reserved names")
struct MamAttributeWriteTests {
    static let create: Int32 = 1
    static let replace: Int32 = 2

    static func set(_ f: OverlayCoreFixture, _ nodeid: UInt64, _ name: String, _ value: String, flags: Int32) -> Int32 {
        let bytes = Array(value.utf8)
        return f.errno {
            try bytes.withUnsafeBytes { try f.fs.setxattr(nodeid, name: name, value: $0, flags: flags, caller: f.caller) }
        }
    }

    static func backingOwnerTag(_ path: String) -> String? {
        ((try? ExtendedAttributes(path: path).get("user.mam.owner")) ?? nil).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test("a work file: XATTR_CREATE of its owner is EEXIST and the file stays encrypted; XATTR_REPLACE changes it")
    func ownedFile() throws {
        let f = try OverlayCoreFixture()
        let secret = Array(repeating: Array("WORK-SECRET ".utf8), count: 50).flatMap { $0 }
        let nodeid = try OutsideRewriteTests.make(f, "w", secret)
        let stored = try f.backingBytes("w")
        #expect(try ProtectedFileHeader.read(fd: Glibc.open(f.backing + "/w", O_RDONLY))?.isEncrypted == true)
        #expect(Self.set(f, nodeid, "user.mam.owner", "", flags: Self.create) == EEXIST)
        #expect(try f.backingBytes("w") == stored, "a refused XATTR_CREATE changed the backing file")
        #expect(Self.set(f, nodeid, "user.mam.encrypted", "1", flags: Self.create) == EEXIST)
        #expect(try f.backingBytes("w") == stored)
        #expect(Self.set(f, nodeid, "user.mam.owner", OverlayCoreFixture.account, flags: Self.replace) == 0)
        #expect(try f.backingBytes("w") == stored, "the owner it already had rewrote the file")
    }

    @Test("an untagged directory: XATTR_REPLACE of its owner is ENODATA and it stays untagged; XATTR_CREATE tags it")
    func untaggedDirectory() throws {
        let f = try OverlayCoreFixture()
        #expect(mkdir(f.backing + "/plain", 0o755) == 0)
        let nodeid = try f.request { try f.fs.lookup(parent: f.root, name: "plain", caller: f.caller) }.nodeid
        #expect(Self.backingOwnerTag(f.backing + "/plain") == nil)
        #expect(Self.set(f, nodeid, "user.mam.owner", "", flags: Self.replace) == ENODATA)
        #expect(Self.backingOwnerTag(f.backing + "/plain") == nil, "a refused XATTR_REPLACE tagged the directory")
        #expect(Self.set(f, nodeid, "user.mam.owner", "", flags: Self.create) == 0)
        #expect(Self.backingOwnerTag(f.backing + "/plain") == "")
        #expect(Self.set(f, nodeid, "user.mam.owner", OverlayCoreFixture.account, flags: Self.create) == EEXIST)
        #expect(Self.backingOwnerTag(f.backing + "/plain") == "")
    }

    @Test("a personal directory with a hard-linked file made a work directory: EMLINK, and no file below it changed")
    func refusedDirectoryChangeChangesNothing() throws {
        let f = try OverlayCoreFixture()
        #expect(mkdir(f.backing + "/pd", 0o755) == 0)
        let nodeid = try f.request { try f.fs.lookup(parent: f.root, name: "pd", caller: f.caller) }.nodeid
        #expect(Self.set(f, nodeid, "user.mam.owner", "", flags: 0) == 0)
        // Untagged files in the personal directory (personal by inheritance), one hard-linked.
        var plain: [String: [UInt8]] = [:]
        for name in ["f1", "f2", "f3", "f4"] {
            let bytes = Array("PERSONAL-\(name)\n".utf8)
            plain[name] = bytes
            #expect(FileManager.default.createFile(atPath: f.backing + "/pd/" + name, contents: Data(bytes)))
        }
        #expect(link(f.backing + "/pd/f3", f.backing + "/f3link") == 0)
        #expect(Self.set(f, nodeid, "user.mam.owner", OverlayCoreFixture.account, flags: 0) == EMLINK)
        for (name, bytes) in plain {
            #expect(try f.backingBytes("pd/" + name) == bytes, "\(name) changed by a refused owner change")
        }
        #expect(Self.backingOwnerTag(f.backing + "/pd") == "")
    }

    @Test("a plain mount hides the provider's attributes: setting user.mam.fp.item is EPERM on a file and a directory, nothing reaches the backing object; get is ENODATA")
    func providerAttributesHiddenOnPlainMounts() throws {
        let f = try OverlayCoreFixture()
        #expect(mkdir(f.backing + "/d", 0o755) == 0)
        let file = try OutsideRewriteTests.make(f, "w", Array("work".utf8))
        let dir = try f.request { try f.fs.lookup(parent: f.root, name: "d", caller: f.caller) }.nodeid
        for (nodeid, backing) in [(file, f.backing + "/w"), (dir, f.backing + "/d")] {
            #expect(Self.set(f, nodeid, "user.mam.fp.item", "forged", flags: 0) == EPERM)
            #expect(((try? ExtendedAttributes(path: backing).get("user.mam.fp.item")) ?? nil) == nil)
            #expect(f.errno { _ = try f.fs.getxattr(nodeid, name: "user.mam.fp.item", size: 64, caller: f.caller) } == ENODATA)
        }
        // One planted behind the mount is neither read nor listed through it.
        try ExtendedAttributes(path: f.backing + "/d").set("user.mam.fp.item", Array("planted".utf8))
        #expect(f.errno { _ = try f.fs.getxattr(dir, name: "user.mam.fp.item", size: 64, caller: f.caller) } == ENODATA)
        let listed = try f.request { try f.fs.listxattr(dir, size: 4096, caller: f.caller) }
        if case .value(let names) = listed {
            #expect(!String(decoding: names, as: UTF8.self).contains("user.mam.fp."))
        } else {
            Issue.record("listxattr gave no names: \(listed)")
        }
    }
}
