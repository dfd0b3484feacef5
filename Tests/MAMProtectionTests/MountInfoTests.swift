import Testing
@testable import MAMProtection

@Suite("MountInfo")
struct MountInfoTests {
    /// Lines as the kernel writes them: optional fields, a bind mount, escapes in every
    /// escaped field, a FUSE mount with a subtype and one without.
    static let table = """
    22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
    25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
    40 22 0:40 / /tmp/a\\040b\\011c\\134d rw,nosuid,nodev,relatime shared:20 master:3 - fuse.mamfs /srv/back\\040ing,x rw,user_id=0,group_id=0
    41 22 8:1 /home/sub\\012dir /mnt/bind rw,relatime - ext4 /dev/sda1 rw
    42 22 0:41 / /mnt/sshfs rw,relatime - fuse.sshfs host:/ rw
    43 22 0:42 / /mnt/plain rw,relatime - fuse /dev/fuse rw
    """

    @Test("every field of every line, with the octal escapes undone")
    func parsesFields() {
        let info = MountInfo(parsing: Self.table)
        #expect(info.entries.map(\.mountPoint) == ["/", "/proc", "/tmp/a b\tc\\d", "/mnt/bind", "/mnt/sshfs", "/mnt/plain"])
        #expect(info.entries.map(\.filesystemType) == ["ext4", "proc", "fuse.mamfs", "ext4", "fuse.sshfs", "fuse"])
        #expect(info.entries[2].source == "/srv/back ing,x")
        #expect(info.entries[3].root == "/home/sub\ndir")
        #expect(info.entries.map(\.isFuse) == [false, false, true, false, true, true])
        #expect(info.entries.map(\.device) == ["8:1", "0:23", "0:40", "8:1", "0:41", "0:42"])
        #expect(info.entries[2].minorDevice == 40)
        #expect(info.entries[2].options == "rw,nosuid,nodev,relatime")
        #expect(info.entries[2].superOptions == "rw,user_id=0,group_id=0")
        #expect(info.entries[0].superOptions == "rw")
        #expect(MountInfo.Entry(root: "/", mountPoint: "/", filesystemType: "", source: "", device: "x").minorDevice == nil)
    }

    @Test("unescape decodes \\ooo to the byte, keeps a backslash without three octal digits")
    func unescapeBytes() {
        #expect(Array(MountInfo.unescape("a\\040b").utf8) == [0x61, 0x20, 0x62])
        #expect(Array(MountInfo.unescape("\\134\\011\\012").utf8) == [0x5C, 0x09, 0x0A])
        #expect(MountInfo.unescape("tail\\04") == "tail\\04")
        #expect(MountInfo.unescape("a\\089") == "a\\089")
        #expect(MountInfo.unescape("a\\+12") == "a\\+12")
        #expect(MountInfo.unescape("a\\477") == "a\\477")
        #expect(MountInfo.unescape("\\303\\251") == "é")
    }

    @Test("short lines are skipped; a line without the separator keeps its mount point")
    func malformedLines() {
        let info = MountInfo(parsing: "1 2 3 4\n\n7 1 0:1 / /x rw\n")
        #expect(info.entries == [MountInfo.Entry(root: "/", mountPoint: "/x", filesystemType: "", source: "", device: "0:1", options: "rw")])
    }

    @Test("the table of this process lists the root mount")
    func currentTable() throws {
        let info = try #require(MountInfo.current())
        #expect(info.entries.contains { $0.mountPoint == "/" })
    }
}
