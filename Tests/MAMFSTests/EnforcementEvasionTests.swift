import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// Ways around the caller-aware rules that a program not in `managedApps` tried: passing for
/// a managed app from a namespace of its own, and swapping what a managed app will write into.
@Suite("Enforcement: evasions of the managed-app decision")
struct EnforcementEvasionTests {
    @Test("a program in a user namespace of its own is no managed app: a tmpfs mounted over the managed directory there, or a managed binary run there, gets EACCES; the audit says why")
    func userNamespaceIsNoManagedApp() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let r = try m.sh(#"""
        unshare -Urm sh -c 'mount -t tmpfs none "$BASE/bin" && cp /bin/cat "$BASE/bin/cat" && "$BASE/bin/cat" work.txt'; echo " spoofed=$?"
        unshare -Ur "$BASE/bin/cat" work.txt; echo " namespaced=$?"
        "$BASE/bin/cat" work.txt; echo " managed=$?"
        """#)
        #expect(r.out == " spoofed=1\n namespaced=1\nwork-secret managed=0\n", "\(r.out) \(r.err)")
        #expect(r.err.components(separatedBy: "Permission denied").count == 3, "\(r.err)")
        m.close()
        let records = try EnforcementMountTests.records(m)
        #expect(records.count == 2 && records.allSatisfy { $0.executable.hasSuffix("/bin/cat (in another user namespace)") },
                "\(records.map(\.executable))")
    }

    @Test("a path that names another file in the daemon's view (a mount namespace of its own), or a removed executable there, is not the caller's; a removed managed executable in the daemon's own namespace (an upgrade) still is")
    func mountNamespacePathIsNotTrusted() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let r = try m.sh(#"""
        unshare -m sh -c 'mount -t tmpfs none "$BASE/bin" && cp /bin/cat "$BASE/bin/cat" && "$BASE/bin/cat" work.txt'; echo " spoofed=$?"
        unshare -m sh -c 'mount -t tmpfs none "$BASE/bin" && cp /bin/bash "$BASE/bin/sh2" && exec "$BASE/bin/sh2" -c "rm \"\$BASE/bin/sh2\"; read -r line < work.txt; [ -n \"\$line\" ] && echo \"\$line\""'; echo " removed=$?"
        cp /bin/bash "$BASE/bin/upgraded" && "$BASE/bin/upgraded" -c 'rm "$BASE/bin/upgraded"; read -r line < work.txt; [ -n "$line" ] && echo "$line"'; echo " here=$?"
        """#)
        #expect(r.out == " spoofed=1\n removed=1\nwork-secret\n here=0\n", "\(r.out) \(r.err)")
        #expect(r.err.components(separatedBy: "Permission denied").count == 3, "\(r.err)")
        m.close()
        let records = try EnforcementMountTests.records(m).map(\.executable).sorted()
        #expect(records.count == 2 && records[0].hasSuffix("/bin/cat (not the file at that path here)")
                    && records[1].hasSuffix("/bin/sh2 (removed, in another mount namespace)"), "\(records)")
    }

    @Test("block: an unmanaged program may not replace a work file by rename, move or link a personal file into a work directory, make a FIFO or symlink there, or tag a directory that inherits work personal; renames in place and a managed app's save-by-rename still work")
    func swapsAreRefused() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        #expect(try m.sh(#"cp "$(command -v mv)" "$BASE/bin/""#).status == 0)
        let r = try m.sh(#"""
        printf 'bait' > pers/bait; mv -f pers/bait work.txt; echo "over=$?"
        python3 -c '
        import ctypes, errno, os
        libc = ctypes.CDLL(None, use_errno=True)
        r = libc.renameat2(-100, b"pers/bait", -100, b"work.txt", 2)
        print("exchange=" + ("ok" if r == 0 else errno.errorcode[ctypes.get_errno()]))
        '
        mv pers/bait wd/bait; echo "into=$?"
        mkdir pers/pd; mv pers/pd wd/pd; echo "dir=$?"
        ln pers/bait wd/linked; echo "link=$?"
        mkfifo wd/pipe; echo "fifo=$?"
        ln -s ../pers/bait wd/pointer; echo "symlink=$?"
        mv pers pers2 && mv pers2 pers; echo "in-place=$?"
        mkdir wd/island; setfattr -n user.mam.owner -v '' wd/island; echo "island=$?"
        "$BASE/bin/cp" pers/over wd/draft && "$BASE/bin/mv" -f wd/draft work.txt; echo "save=$?"
        "$BASE/bin/cat" work.txt
        """#)
        #expect(r.out == "over=1\nexchange=EACCES\ninto=1\ndir=1\nlink=1\nfifo=1\nsymlink=1\nin-place=0\nisland=1\nsave=0\nold personal", "\(r.out) \(r.err)")
        #expect(try m.backingHeader("work.txt")?.owner == MountedFixture.account, "still a work file")
        #expect(try m.backingHeader("work.txt")?.isEncrypted == true)
        #expect(!FileManager.default.fileExists(atPath: m.backing + "/wd/bait"))
        #expect(FileManager.default.fileExists(atPath: m.backing + "/pers/bait"))
        let tag = try shell("getfattr --only-values -n user.mam.owner \(shellQuote(m.backing + "/wd/island")) 2>&1")
        #expect(tag.status != 0 && tag.out.contains("No such attribute"), "the island stays untagged: \(tag.out)")
        m.close()
        let denied = try EnforcementMountTests.records(m).filter { $0.decision == "denied" }
        // Bursts are written by kind, so the order across kinds is not the requests'.
        #expect(denied.map(\.action).sorted() == ["create", "create", "create", "create", "create", "declassify", "open-write", "open-write"], "\(denied.map { "\($0.action) \($0.path)" })")
    }

    @Test("a directory holding a work file may not be renamed into a location missing from saveToLocations; one without work files may")
    func directoryMoveIsASave() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        let share = EnforcementMountTests.mountPath(m, "share")
        try EnforcementMountTests.prepare(m, level: "block", extra: """
        , "locations": {"SharePoint": ["\(share)"]}, "saveToLocations": ["LocalDrive", "OneDriveForBusiness"]
        """)
        let r = try m.sh(#"""
        mkdir -p sub/deeper empty && "$BASE/bin/cp" work.txt sub/deeper/w.txt && mv sub share/sub; echo "work=$?"
        mv empty share/empty; echo "empty=$?"
        """#)
        #expect(r.out == "work=1\nempty=0\n", "\(r.out) \(r.err)")
        #expect(r.err.contains("Permission denied"), "\(r.err)")
        #expect(FileManager.default.fileExists(atPath: m.backing + "/sub/deeper/w.txt"))
        #expect(!FileManager.default.fileExists(atPath: m.backing + "/share/sub"))
        #expect(FileManager.default.fileExists(atPath: m.backing + "/share/empty"))
        m.close()
        let saves = try EnforcementMountTests.records(m).filter { $0.rule == "saveToLocations" }
        #expect(saves.count == 1 && saves.first?.path.hasSuffix("/share/sub") == true, "\(saves.map(\.path))")
    }

    @Test("a directory holding a location prefix may not be renamed so that the work files inside land in a location missing from saveToLocations")
    func directoryMoveAcrossAPrefixInside() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        let od = EnforcementMountTests.mountPath(m, "a/od")
        try EnforcementMountTests.prepare(m, level: "block", extra: """
        , "locations": {"OneDriveForBusiness": ["\(od)"]}, "saveToLocations": ["OneDriveForBusiness"]
        """)
        let r = try m.sh(#"""
        mkdir -p a/od && "$BASE/bin/cp" work.txt a/od/f && echo made; mv a b; echo "mv=$?"; mkdir c; mv c d; echo "plain=$?"
        """#)
        #expect(r.out == "made\nmv=1\nplain=0\n", "\(r.out) \(r.err)")
        #expect(FileManager.default.fileExists(atPath: m.backing + "/a/od/f"))
        m.close()
        let saves = try EnforcementMountTests.records(m).filter { $0.rule == "saveToLocations" }
        #expect(saves.count == 1 && saves.first?.path.hasSuffix("/b") == true, "\(saves.map(\.path))")
    }
}

