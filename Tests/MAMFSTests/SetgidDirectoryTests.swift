import Foundation
import Glibc
import Testing
import MAMTestSupport

/// Objects made by a user other than root in a setgid directory (xfstests generic/696): they
/// get the directory's group, a new subdirectory inherits S_ISGID, and S_ISGID on a new file
/// stays only when the creator is in the file's group: the same owners and modes as on ext4,
/// through an `allow_other` mount whose daemon runs as root.
@Suite("POSIX: setgid directories, mount vs ext4")
struct SetgidDirectoryTests {
    /// argv: a directory holding "sg" (setgid, group 100, 2777) and "plain" (0777), and a tag.
    /// Under umask 0 and 022, makes in both: files by open (02755, 0644), by mknod (regular
    /// 02755, fifo 02755), a directory (0755) and a symlink; prints "<dir> <name> <uid> <gid>
    /// <mode>" for each.
    static let script = #"""
    import os, stat, sys
    root, tag = sys.argv[1], sys.argv[2]
    for um in (0, 0o022):
        os.umask(um)
        for d in ("sg", "plain"):
            def name(kind):
                return os.path.join(root, d, "%s-%s-%o" % (tag, kind, um))
            os.close(os.open(name("open2755"), os.O_CREAT | os.O_WRONLY, 0o2755))
            os.close(os.open(name("open644"), os.O_CREAT | os.O_WRONLY, 0o644))
            os.mknod(name("mknod2755"), stat.S_IFREG | 0o2755)
            os.mknod(name("fifo2755"), stat.S_IFIFO | 0o2755)
            os.mkdir(name("dir755"), 0o755)
            os.symlink("target", name("link"))
    for d in ("sg", "plain"):
        for entry in sorted(os.listdir(os.path.join(root, d))):
            if entry.startswith(tag + "-"):
                st = os.lstat(os.path.join(root, d, entry))
                print(d, entry, st.st_uid, st.st_gid, oct(st.st_mode))
    """#

    /// Makes the two directories in `root` and runs the script there as user nobody (65534),
    /// once in group 100 and once in no supplementary group.
    static func run(in root: String, environment: [String: String]) throws -> [String] {
        let script = root + "/../setgid-probe.py"
        try Data(Self.script.utf8).write(to: URL(fileURLWithPath: script))
        let r = try shell("""
        chmod 644 \(shellQuote(script)) && cd \(shellQuote(root)) && mkdir sg plain && chgrp 100 sg && chmod 2777 sg && chmod 777 plain && \
        setpriv --reuid=65534 --regid=65534 --groups=100 /usr/bin/python3 \(shellQuote(script)) "$PWD" member && \
        setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 \(shellQuote(script)) "$PWD" other
        """, environment: environment)
        #expect(r.status == 0, "\(root): \(r.err)")
        return r.out.split(separator: "\n").map(String.init)
    }

    @Test("group, S_ISGID of new subdirectories, set-id bits of new files: the same as ext4 for a member and a non-member",
          .enabled(if: geteuid() == 0, "acts as user nobody"), arguments: MountedFixture.Kind.allCases)
    func setgidDirectoryMatchesExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind, options: ["allow_other"]) { m, reference in try Self.compare(kind, m, reference) }
    }

    static func compare(_ kind: MountedFixture.Kind, _ m: MountedFixture, _ reference: Ext4Reference) throws {
        _ = try shell("chmod 755 \(shellQuote(m.base)) \(shellQuote(reference.path))")
        let onMount = try Self.run(in: m.mountpoint, environment: m.environment)
        let onExt4 = try Self.run(in: reference.path, environment: m.environment)
        #expect(onMount.count == 48, "\(onMount.count) objects")
        #expect(onMount == onExt4, "mount vs ext4:\n\(zip(onMount, onExt4).filter { $0 != $1 }.map { "\($0)  |  \($1)" }.joined(separator: "\n"))")
        // What ext4 answers, spelled out: the directory's group in sg, S_ISGID on subdirectories,
        // S_ISGID kept for the member and stripped for the other user.
        for line in onMount where line.hasPrefix("sg ") {
            #expect(line.split(separator: " ")[3] == "100", "\(line)")
        }
        for line in onMount where line.hasPrefix("plain ") {
            #expect(line.split(separator: " ")[3] == "65534", "\(line)")
        }
        #expect(onMount.contains("sg member-dir755-0 65534 100 0o42755"))
        #expect(onMount.contains("sg other-dir755-22 65534 100 0o42755"))
        #expect(onMount.contains("sg member-open2755-0 65534 100 0o102755"))
        #expect(onMount.contains("sg other-open2755-0 65534 100 0o100755"))
        #expect(onMount.contains("sg other-mknod2755-22 65534 100 0o100755"))
        #expect(onMount.contains("plain other-open2755-22 65534 65534 0o102755"))
        #expect(onMount.contains("plain member-fifo2755-0 65534 65534 0o12755"))
        // On the backing files too, and a managed file stays encrypted.
        var st = stat()
        #expect(lstat(m.backing + "/sg/other-dir755-0", &st) == 0 && st.st_gid == 100 && st.st_mode & S_ISGID != 0)
        if kind == .managed {
            #expect(try m.backingHeader("sg/member-open644-22")?.isEncrypted == true)
        }
    }
}
