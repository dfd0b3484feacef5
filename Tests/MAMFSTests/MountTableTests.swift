import Foundation
import Testing
import MAMProtection
@testable import MAMFS

@Suite("MountTable")
struct MountTableTests {
    /// A namespace with two nested mamfs mounts, a mamfs mount whose paths need every escape,
    /// FUSE mounts of other programs, a mamfs-typed mount whose source is not a path, and tmpfs.
    static let table = """
    22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
    30 22 0:30 / /home/u/view rw,nosuid,nodev - fuse.mamfs /srv/backing rw,user_id=0,group_id=0
    31 30 0:31 / /home/u/view/inner rw,nosuid,nodev - fuse.mamfs /srv/other rw,user_id=0,group_id=0
    32 22 0:32 / /tmp/sp\\040ace\\011tab\\134slash,comma rw - fuse.mamfs /srv/b\\040a\\011c\\134k,ing rw
    33 22 0:33 / /mnt/sshfs rw - fuse.sshfs host:/srv rw
    34 22 0:34 / /mnt/fuse rw - fuse /dev/fuse rw
    35 22 0:35 / /mnt/odd rw - fuse.mamfs not-a-path rw
    36 22 0:36 / /mnt/tmp rw - tmpfs tmpfs rw
    """

    let mounts = MountTable(MountInfo(parsing: MountTableTests.table))

    @Test("only fuse.mamfs mounts with an absolute source, unescaped byte for byte")
    func mamfsMounts() {
        #expect(mounts.mounts == [
            .init(mountPoint: "/home/u/view", backingDirectory: "/srv/backing"),
            .init(mountPoint: "/home/u/view/inner", backingDirectory: "/srv/other"),
            .init(mountPoint: "/tmp/sp ace\ttab\\slash,comma", backingDirectory: "/srv/b a\tc\\k,ing"),
        ])
    }

    @Test("a mamfs mount by its mount point, and none for other mounts or a bare path")
    func mountAt() {
        #expect(mounts.mount(at: "/tmp/sp ace\ttab\\slash,comma")?.backingDirectory == "/srv/b a\tc\\k,ing")
        #expect(mounts.mount(at: "/home/u/view/inner")?.backingDirectory == "/srv/other")
        #expect(mounts.mount(at: "/mnt/sshfs") == nil)
        #expect(mounts.mount(at: "/mnt/odd") == nil)
        #expect(mounts.mount(at: "/home/u/view/file") == nil)
        #expect(mounts.mount(at: "/home/u/vie") == nil)
    }

    @Test("FUSE mounts of any kind are FUSE mounts; other mounts and plain directories are not")
    func fuseMounts() {
        for path in ["/home/u/view", "/mnt/sshfs", "/mnt/fuse", "/mnt/odd", "/tmp/sp ace\ttab\\slash,comma"] {
            #expect(mounts.isFuseMount(path), "\(path)")
        }
        for path in ["/", "/mnt/tmp", "/mnt", "/home/u/view/inner/x", "/tmp/sp ace"] {
            #expect(!mounts.isFuseMount(path), "\(path)")
        }
    }

    @Test("a path maps into the backing directory of the innermost mamfs mount holding it")
    func backingPaths() {
        #expect(mounts.backingPath(of: "/home/u/view") == "/srv/backing")
        #expect(mounts.backingPath(of: "/home/u/view/a/b.txt") == "/srv/backing/a/b.txt")
        #expect(mounts.backingPath(of: "/home/u/view/inner") == "/srv/other")
        #expect(mounts.backingPath(of: "/home/u/view/inner/x") == "/srv/other/x")
        #expect(mounts.backingPath(of: "/home/u/view/innerx") == "/srv/backing/innerx")
        #expect(mounts.backingPath(of: "/tmp/sp ace\ttab\\slash,comma/f g") == "/srv/b a\tc\\k,ing/f g")
        #expect(mounts.backingPath(of: "/home/u/viewer/f") == nil)
        #expect(mounts.backingPath(of: "/mnt/sshfs/f") == nil)
        #expect(mounts.backingPath(of: "/mnt/odd/f") == nil)
        #expect(mounts.backingPath(of: "/etc/passwd") == nil)
    }

    @Test("paths are compared as bytes: a decomposed é is not the composed one the kernel has")
    func bytewiseComparison() {
        let table = MountTable(MountInfo(parsing: "30 22 0:30 / /m/caf\\303\\251 rw - fuse.mamfs /b rw\n"))
        #expect(table.backingPath(of: "/m/caf\u{E9}/x") == "/b/x")
        #expect(table.backingPath(of: "/m/cafe\u{301}/x") == nil)
        #expect(table.mount(at: "/m/cafe\u{301}") == nil)
    }

    @Test("stacked mounts: the one on top answers")
    func stackedMounts() {
        let table = MountTable(MountInfo(parsing: """
        30 22 0:30 / /m rw - fuse.mamfs /first rw
        31 30 0:31 / /m rw - fuse.mamfs /second rw
        """))
        #expect(table.mount(at: "/m")?.backingDirectory == "/second")
        #expect(table.backingPath(of: "/m/f") == "/second/f")
    }

    @Test("a mamfs mount on / maps every path")
    func rootMount() {
        let table = MountTable(MountInfo(parsing: "30 22 0:30 / / rw - fuse.mamfs /b rw\n"))
        #expect(table.backingPath(of: "/") == "/b")
        #expect(table.backingPath(of: "/x/y") == "/b/x/y")
    }

    @Test("fsname escapes what libfuse's option parser would take: comma and backslash")
    func fsnameOption() {
        #expect(MountTable.fsnameOption(backingDirectory: "/srv/plain dir") == "fsname=/srv/plain dir")
        #expect(MountTable.fsnameOption(backingDirectory: "/a,b\\c") == "fsname=/a\\,b\\\\c")
        #expect(MountTable.subtypeOption == "subtype=mamfs")
        #expect(MountTable.filesystemType == "fuse.mamfs")
        #expect(MountTable.backingDirectory(source: "/a,b\\c") == "/a,b\\c")
        #expect(MountTable.backingDirectory(source: "host:/x") == nil)
    }

    @Test("resolvedPath: absolute, dots removed, the directory's symbolic links resolved, the last component kept")
    func resolvedPath() throws {
        let base = try realTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try FileManager.default.createDirectory(atPath: base + "/real/sub", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: base + "/link", withDestinationPath: base + "/real")
        try FileManager.default.createSymbolicLink(atPath: base + "/real/file-link", withDestinationPath: "/etc/passwd")
        #expect(MountTable.resolvedPath(base + "/link/./sub/../file-link") == base + "/real/file-link")
        #expect(MountTable.resolvedPath(base + "/link") == base + "/link")
        #expect(MountTable.resolvedPath(base + "/link/sub") == base + "/real/sub")
        #expect(MountTable.resolvedPath(base + "/missing/x/../y") == base + "/missing/y")
    }

    private func realTemporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "/mamfs-mounttable-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return try #require(realpath(path, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        })
    }
}
