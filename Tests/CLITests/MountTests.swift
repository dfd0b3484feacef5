import Foundation
import MAMProtection
import Testing
import MAMTestSupport

/// True when this process may open /dev/fuse (mount tests need it).
let fuseUsable: Bool = {
    let fd = open("/dev/fuse", O_RDWR)
    if fd >= 0 { close(fd) }
    return fd >= 0
}()

@Suite("CLI: mount and unmount")
struct MountTests {
    /// Unmounts `mountpoint` whatever state it is in (lazily as a fallback), so a failed test
    /// leaves no mount.
    static func forceUnmount(_ mountpoint: String) {
        FuseMounts.unmount(mountpoint)
    }

    /// A state with the demo account enrolled and empty backing and mountpoint directories.
    static func mountSandbox() throws -> (Sandbox, backing: String, mountpoint: String) {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let backing = sandbox.path("backing")
        let mountpoint = sandbox.path("mnt")
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        return (sandbox, backing, mountpoint)
    }

    @Test("mount shows plaintext, stores ciphertext, and unmount ends it", .enabled(if: fuseUsable))
    func mountRoundTrip() throws {
        let (sandbox, backing, mountpoint) = try Self.mountSandbox()
        defer { Self.forceUnmount(mountpoint) }

        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        let original = try Data(contentsOf: URL(fileURLWithPath: Fixtures.gpl3))
        try original.write(to: URL(fileURLWithPath: mountpoint + "/GPL-3"))
        #expect(try sandbox.read(mountpoint + "/GPL-3") == original)
        #expect(!(try sandbox.read(backing + "/GPL-3").contains(Fixtures.gplPhrase)))
        let info = try jsonArray(try sandbox.run(["info", "--json", backing + "/GPL-3"]))
        #expect(info.first?["owner"] as? String == Fixtures.account)
        #expect(info.first?["encrypted"] as? Bool == true)
        #expect((info.first?["size"] as? NSNumber)?.intValue == original.count)

        let unmount = try sandbox.run(["unmount", mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: mountpoint).isEmpty)
        let again = try sandbox.run(["unmount", mountpoint])
        #expect(again.status == 66)
        #expect(again.errLines == ["mamfs: unmount: \(mountpoint): not a mamfs mount"])
    }

    @Test("a backing directory named with a backslash, a comma and a space is the mount's source byte for byte, and file verbs find it",
          .enabled(if: fuseUsable))
    func backingNameWithEscapedCharacters() throws {
        let (sandbox, _, mountpoint) = try Self.mountSandbox()
        defer { Self.forceUnmount(mountpoint) }
        let backing = sandbox.path("back\\slash,comma dir")
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        let entry = MountInfo.current()?.entries.last { $0.mountPoint == mountpoint }
        #expect(entry?.filesystemType == "fuse.mamfs")
        #expect(entry?.source == backing)
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: mountpoint + "/q"))
        let info = try jsonArray(try sandbox.run(["info", "--json", mountpoint + "/q"]))
        #expect(info.first?["encrypted"] as? Bool == true)
        #expect((info.first?["size"] as? NSNumber)?.intValue == 7)
        let unmount = try sandbox.run(["unmount", mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
    }

    @Test("file verbs on a path inside a mount act on the backing file (regression: protect wrote a header into the plaintext)",
          .enabled(if: fuseUsable))
    func fileVerbsOnMountPaths() throws {
        let (sandbox, backing, mountpoint) = try Self.mountSandbox()
        defer { Self.forceUnmount(mountpoint) }
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn, "-o", "attr_timeout=0,entry_timeout=0"])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        let original = try Data(contentsOf: URL(fileURLWithPath: Fixtures.gpl3))
        try original.write(to: URL(fileURLWithPath: mountpoint + "/q"))
        let info = try jsonArray(try sandbox.run(["info", "--json", mountpoint + "/q"]))
        #expect(info.first?["owner"] as? String == Fixtures.account)
        #expect(info.first?["encrypted"] as? Bool == true)
        #expect(info.first?["path"] as? String == mountpoint + "/q")
        let protect = try sandbox.run(["protect", mountpoint + "/q", "--account", ""])
        #expect(protect.status == 0, "\(protect.err)")
        #expect(try sandbox.read(mountpoint + "/q") == original)
        let after = try jsonArray(try sandbox.run(["info", "--json", backing + "/q"]))
        #expect(after.first?["encrypted"] as? Bool == false)
        #expect(after.first?["owner"] as? String == "")
        let unmount = try sandbox.run(["unmount", mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
    }

    @Test("mount refuses a missing mountpoint (66), a non-empty one (64) and an unknown account (77)")
    func mountErrors() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let backing = sandbox.path("backing")
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
        let missing = try sandbox.run(["mount", backing, sandbox.path("no-mnt")])
        #expect(missing.status == 66)
        #expect(missing.errLines.count == 1)
        #expect(missing.err.contains(sandbox.path("no-mnt")))

        let full = sandbox.path("full")
        try sandbox.write("full/file", "x")
        defer { Self.forceUnmount(full) }
        let notEmpty = try sandbox.run(["mount", backing, full])
        #expect(notEmpty.status == 64)
        #expect(notEmpty.errLines.count == 1)
        #expect(notEmpty.err.contains("not empty"))

        let empty = sandbox.path("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { Self.forceUnmount(empty) }
        let unknown = try sandbox.run(["mount", backing, empty, "--account", "nobody@contoso.com"])
        #expect(unknown.status == 77)
        #expect(unknown.errLines.count == 1)

        let noBacking = try sandbox.run(["mount", sandbox.path("no-backing"), empty])
        #expect(noBacking.status == 66)
    }

    @Test("unmount of a directory that is not mounted exits 66 with one line")
    func unmountNotMounted() throws {
        let sandbox = try Sandbox()
        let directory = sandbox.path("plain-dir")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let result = try sandbox.run(["unmount", directory])
        #expect(result.status == 66)
        #expect(result.errLines == ["mamfs: unmount: \(directory): not a mamfs mount"])
        let missing = try sandbox.run(["unmount", sandbox.path("nope")])
        #expect(missing.status == 66)
    }
}
