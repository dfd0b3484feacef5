import Foundation
import Glibc
import Testing
@testable import MAMFS
@testable import MAMProtection
import MAMSystem
import MAMTestSupport

/// The owner walk's answers kept per directory (`InheritedOwnerCache`): a new file always gets
/// the owner the directories above it say now, whoever changed them and however.
@Suite("Owner walk: answers kept per directory")
struct InheritedOwnerCacheTests {
    /// The owner in the header of each backing file named, "-" for an untagged one.
    static func owners(_ m: MountedFixture, _ names: [String]) throws -> [String] {
        try names.map { try m.backingHeader($0).map { $0.owner.isEmpty ? "personal" : $0.owner } ?? "-" }
    }

    @Test("A directory moved on the backing path below another tag: its next new file takes that tag")
    func directoryMovedBehindTheMount() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            mkdir -p p/d q && setfattr -n user.mam.owner -v '' q && echo one > p/d/f1 && echo two > p/d/f2 && \
            mv "$B/p/d" "$B/q/d" && echo three > q/d/f3 && cat q/d/f1 q/d/f3
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "one\nthree\n")
            #expect(try Self.owners(m, ["q/d/f1", "q/d/f2", "q/d/f3"]) == [MountedFixture.account, MountedFixture.account, "personal"])
        }
    }

    @Test("A directory moved through the mount below another tag: its next new file takes that tag")
    func directoryMovedThroughTheMount() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            mkdir -p p/d q && setfattr -n user.mam.owner -v '' q && echo one > p/d/f1 && echo two > p/d/f2 && \
            mv p/d q/d && echo three > q/d/f3 && mv q/d p/d && echo four > p/d/f4
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(try Self.owners(m, ["p/d/f1", "p/d/f3", "p/d/f4"]) == [MountedFixture.account, "personal", MountedFixture.account])
        }
    }

    @Test("A tag taken off, or set on the backing root, behind the mount: the next new file below follows")
    func tagRemovedAndRootTaggedBehindTheMount() throws {
        try withMount(.managed) { m in
            let r = try m.sh("""
            mkdir -p t/u r && setfattr -n user.mam.owner -v '' t && echo a > t/u/f1 && echo b > t/u/f2 && \
            setfattr -x user.mam.owner "$B/t" && echo c > t/u/f3 && \
            echo d > r/f1 && setfattr -n user.mam.owner -v '' "$B" && echo e > r/f2 && echo f > t/u/f4
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(try Self.owners(m, ["t/u/f1", "t/u/f2", "t/u/f3", "r/f1", "r/f2", "t/u/f4"])
                    == ["personal", "personal", MountedFixture.account, MountedFixture.account, "personal", "personal"])
        }
    }

    @Test("The mount's CLI tags a directory while mounted, then a tag is set through the mount: the next new file below takes each")
    func directoryTaggedByTheCLIAndThroughTheMount() throws {
        try withMount(.managed) { m in
            #expect(try m.sh("mkdir -p w/x && echo a > w/x/f1 && echo b > w/x/f2").status == 0)
            try m.mamfs(["protect", m.backing + "/w", "--account", ""])
            #expect(try m.sh("echo c > w/x/f3 && echo d > w/x/f4").status == 0)
            #expect(try Self.owners(m, ["w/x/f1", "w/x/f3", "w/x/f4"]) == [MountedFixture.account, "personal", "personal"])
            // Through the mount a directory's owner changes with everything below it.
            let r = try m.sh(#"setfattr -n user.mam.owner -v "$ACCT" w && echo e > w/x/f5"#)
            #expect(r.status == 0, "\(r.err)")
            #expect(try Self.owners(m, ["w/x/f3", "w/x/f5"]) == [MountedFixture.account, MountedFixture.account])
        }
    }

    @Test("A directory above mounted over and unmounted on the backing path: the next new file below follows where \"..\" leads",
          .enabled(if: geteuid() == 0, "bind-mounts on the backing path"))
    func mountOverALevelBehindTheMount() throws {
        try withMount(.managed) { m in
            // The shell stays in home/inbox: its creates go to that directory while home is
            // covered, and the walk's ".." from it lands on what is mounted there.
            let r = try m.sh("""
            mkdir -p home/inbox work && setfattr -n user.mam.owner -v '' home && cd home/inbox && \
            echo a > f1 && echo b > f2 && mount --bind "$B/work" "$B/home" || exit 1
            echo c > f3; rc=$?
            umount "$B/home" || exit 1
            [ $rc = 0 ] && echo d > f4
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(try Self.owners(m, ["home/inbox/f1", "home/inbox/f2", "home/inbox/f3", "home/inbox/f4"])
                    == ["personal", "personal", MountedFixture.account, "personal"])
        }
    }

    @Test("The daemon keeps the walk's answer: it marks each level it read, up to the backing root",
          .enabled(if: !MountedFixture.useInProcess, "needs the daemon's own /proc/<pid>/fdinfo"))
    func levelsAreWatched() throws {
        try withMount(.managed) { m in
            let pid = try #require(m.daemonPID)
            #expect(try m.sh("mkdir -p a/b/c && echo x > a/b/c/f && echo y > a/b/c/g").status == 0)
            let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
            let groups = fds.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == "anon_inode:[fanotify]" }
            #expect(groups.count == 1)
            let info = try String(contentsOfFile: "/proc/\(pid)/fdinfo/\(try #require(groups.first))", encoding: .utf8)
            // c, b, a and the backing root.
            #expect(info.split(separator: "\n").filter { $0.hasPrefix("fanotify ino:") }.count == 4, "\(info)")
        }
    }
}

/// The cache itself on a scratch directory: an answer is dropped by a change of a watched
/// level, and a walk begun before a change does not store what it read.
@Suite("Inherited owner cache")
struct InheritedOwnerCacheCoreTests {
    @Test("An answer is kept until a watched level changes; one read before a change is not stored")
    func dropsOnChangeAndRefusesStaleAnswers() throws {
        var template = Array("/var/tmp/mamfs-owner-cache-XXXXXX".utf8CString)
        let made = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        let path = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(mkdir(path + "/d", 0o755) == 0)
        // The cache drops its answers on any change of the mount table too, which the tests
        // running beside this one change: where it can, it runs in a namespace of its own.
        let seen = try PrivateMountNamespace.isAvailable ? PrivateMountNamespace.run { try Self.exercise(path) } : Self.exercise(path)
        #expect(seen.first == nil)
        #expect(seen.watched && !seen.watchedElsewhere, "another filesystem is not watched")
        #expect(seen.kept == "acct")
        #expect(seen.afterTagSet == nil, "dropped by the tag set")
        #expect(seen.afterStaleStore == nil, "a walk that read the level before a change stores nothing")
        #expect(seen.marksPlaced == 1)
    }

    struct Seen {
        var first: String?, watched = false, watchedElsewhere = false, kept: String?
        var afterTagSet: String?, afterStaleStore: String?, marksPlaced = 0
    }

    static func exercise(_ path: String) throws -> Seen {
        let root = open(path, pathOnly | O_DIRECTORY | O_CLOEXEC)
        let level = open(path + "/d", pathOnly | O_DIRECTORY | O_CLOEXEC)
        defer { close(root); close(level) }
        var rootStat = stat(), levelStat = stat()
        guard fstat(root, &rootStat) == 0 && fstat(level, &levelStat) == 0 else { throw Errno.current }
        guard let cache = InheritedOwnerCache(rootFD: root, rootKey: BackingKey(rootStat)) else {
            throw Errno(rawValue: ENOTSUP)
        }
        let key = BackingKey(levelStat)
        var seen = Seen()
        var generation: UInt64
        (seen.first, generation) = cache.lookup(key)
        seen.watched = cache.watch(levelFD: level, pathOnly: true, status: levelStat)
        var elsewhere = levelStat
        elsewhere.st_dev &+= 1
        seen.watchedElsewhere = cache.watch(levelFD: level, pathOnly: true, status: elsewhere)
        cache.store("acct", for: key, generation: generation)
        seen.kept = cache.lookup(key).owner

        try ExtendedAttributes(path: path + "/d").set("user.mam.owner", string: "")
        (seen.afterTagSet, generation) = cache.lookup(key)
        // A walk that read the level before this change must not store its answer.
        try ExtendedAttributes(path: path + "/d").remove("user.mam.owner")
        cache.store("", for: key, generation: generation)
        seen.afterStaleStore = cache.lookup(key).owner
        seen.marksPlaced = cache.marksPlaced
        return seen
    }
}
