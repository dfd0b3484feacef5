import Foundation
import Testing
import MAMProtection
import MAMTestSupport

@Suite("Install: make install and make uninstall with DESTDIR and PREFIX")
struct InstallTests {
    /// What `make install` puts under DESTDIR for `prefix` (the mount helper always in /sbin,
    /// where mount(8) looks for it), with every directory it creates.
    static func expectedListing(prefix: String) -> [String] {
        let files = [
            "f 755 \(prefix)/bin/mamfs",
            "f 755 /sbin/mount.fuse.mamfs",
            "f 644 \(prefix)/share/man/man1/mamfs.1",
            "f 644 \(prefix)/share/man/man5/mamfs-policy.5",
            "f 644 \(prefix)/share/man/man8/mount.fuse.mamfs.8",
            "f 644 \(prefix)/share/bash-completion/completions/mamfs",
            "f 644 \(prefix)/lib/systemd/user/mamfs@.service",
            "f 644 \(prefix)/lib/systemd/system/mamfs@.service",
        ]
        var directories = Set<String>()
        for file in files {
            var directory = (String(file.split(separator: " ")[2]) as NSString).deletingLastPathComponent
            while directory != "/" {
                directories.insert("d 755 " + directory)
                directory = (directory as NSString).deletingLastPathComponent
            }
        }
        return (files + directories).sorted()
    }

    @Test("PREFIX=/usr: exactly the expected files and modes, an installed mamfs that runs, the paths it names; uninstall leaves nothing")
    func installUninstallUsr() throws {
        let tree = try InstalledTree(prefix: "/usr")
        #expect(tree.listing() == Self.expectedListing(prefix: "/usr"))

        let version = try runProcess(tree.path("/usr/bin/mamfs"), ["--version"], environment: testEnvironment())
        let built = try runProcess(MamfsBinary.path, ["--version"], environment: testEnvironment())
        #expect(version.status == 0, "\(version.err)")
        #expect(version.out == built.out && version.out.hasPrefix("mamfs "), "installed: \(version.out), built: \(built.out)")

        // The installed helper and units name the installed binary, not a placeholder.
        let helper = try tree.text("/sbin/mount.fuse.mamfs")
        #expect(helper.split(separator: "\n").contains("installed_mamfs=\"/usr/bin/mamfs\""))
        for unit in ["/usr/lib/systemd/user/mamfs@.service", "/usr/lib/systemd/system/mamfs@.service"] {
            let text = try tree.text(unit)
            #expect(!text.contains("@"+"BINDIR@"), "\(unit) still holds the placeholder")
            #expect(text.contains("\nExecStart=/usr/bin/mamfs mount "), "\(unit)")
        }
        // The man pages are the built ones, not their source.
        #expect(try tree.text("/usr/share/man/man1/mamfs.1").contains(".TH \"MAMFS\" \"1\""))

        let uninstall = try InstalledTree.make(["uninstall", "DESTDIR=\(tree.root)", "PREFIX=/usr"])
        #expect(uninstall.status == 0, "\(uninstall.err)")
        #expect(tree.listing() == [], "left behind: \(tree.listing())")
    }

    @Test("the default PREFIX is /usr/local; uninstall with the same variables leaves nothing")
    func installUninstallDefaultPrefix() throws {
        let tree = try InstalledTree(prefix: nil)
        #expect(tree.listing() == Self.expectedListing(prefix: "/usr/local"))
        #expect(try tree.text("/sbin/mount.fuse.mamfs").contains("\ninstalled_mamfs=\"/usr/local/bin/mamfs\"\n"))
        #expect(try tree.text("/usr/local/lib/systemd/system/mamfs@.service").contains("\nExecStart=/usr/local/bin/mamfs mount "))
        let uninstall = try InstalledTree.make(["uninstall", "DESTDIR=\(tree.root)"])
        #expect(uninstall.status == 0, "\(uninstall.err)")
        #expect(tree.listing() == [], "left behind: \(tree.listing())")
    }

    @Test("uninstall leaves files it did not install, and their directories")
    func uninstallKeepsOtherFiles() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let other = tree.path("/usr/share/man/man1/other.1")
        try Data("other\n".utf8).write(to: URL(fileURLWithPath: other))
        let uninstall = try InstalledTree.make(["uninstall", "DESTDIR=\(tree.root)", "PREFIX=/usr"])
        #expect(uninstall.status == 0, "\(uninstall.err)")
        #expect(tree.listing() == ["d 755 /usr", "d 755 /usr/share", "d 755 /usr/share/man", "d 755 /usr/share/man/man1",
                                   "f 644 /usr/share/man/man1/other.1"])
    }

    @Test("the installed mount helper runs the installed mamfs: a mount it makes serves the backing directory", .enabled(if: InstalledTree.fuseUsable))
    func installedHelperMounts() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let (sandbox, backing, mountpoint) = try MountTests.mountSandbox()
        defer { FuseMounts.tearDown(mountpoint) }
        // As mount(8) runs it, with the installed mamfs as the one to use.
        var environment = sandbox.environment
        environment["MAMFS_BIN"] = tree.path("/usr/bin/mamfs")
        let mount = try runProcess(tree.path("/sbin/mount.fuse.mamfs"),
                                   [backing, mountpoint, "-o", "rw,nofail,account=\(Fixtures.upn),state=\(sandbox.state)"],
                                   environment: environment)
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        let entry = MountInfo.current()?.entries.first { $0.mountPoint == mountpoint }
        #expect(entry?.filesystemType == "fuse.mamfs")
        #expect(entry?.source == backing)
        let daemons = FuseMounts.daemonPIDs(serving: mountpoint)
        #expect(daemons.contains { Self.executable(of: $0) == tree.path("/usr/bin/mamfs") }, "the daemon is the installed mamfs")

        let original = try sandbox.read(Fixtures.gpl3)
        try original.write(to: URL(fileURLWithPath: mountpoint + "/GPL-3"))
        #expect(try sandbox.read(mountpoint + "/GPL-3") == original)
        #expect(!(try sandbox.read(backing + "/GPL-3")).contains(Fixtures.gplPhrase), "stored encrypted")
        let unmount = try sandbox.run(["unmount", mountpoint])
        #expect(unmount.status == 0, "\(unmount.err)")
        #expect(!FuseMounts.isMounted(mountpoint))
    }

    /// The executable of process `pid` (/proc/PID/exe), nil when it is gone.
    static func executable(of pid: pid_t) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
