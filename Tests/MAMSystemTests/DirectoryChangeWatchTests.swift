import Foundation
import Glibc
import MAMSystem
import MAMTestSupport
import Testing

/// fanotify as the owner cache uses it: which changes of a watched directory are reported, and
/// that they are reported by the time the call that made them returns.
@Suite struct DirectoryChangeWatchTests {
    /// O_PATH (glibc declares it only under _GNU_SOURCE).
    static let pathOnly: Int32 = 0o10000000

    @Test("A tag set, a mode changed, a move and a removal are reported at once; a file made or changed inside is not")
    func reportsWhatCanChangeAnInheritedOwner() throws {
        let scratch = try ScratchDirectory()
        #expect(mkdir(scratch.file("d"), 0o755) == 0 && mkdir(scratch.file("other"), 0o755) == 0)
        let directory = open(scratch.file("d"), Self.pathOnly | O_DIRECTORY | O_CLOEXEC)
        #expect(directory >= 0)
        let watch = try DirectoryChangeWatch()
        try watch.watch(directory, pathOnly: true)
        try watch.watch(directory, pathOnly: true)
        #expect(watch.marksPlaced == 2)
        // Only the directories' part is asserted: tests running beside this one mount and
        // unmount in this namespace, which the watch reports too (asserted below, in a private one).
        #expect(!watch.drain().contains(.directories))

        let file = try scratch.write("d/file", [1])
        try ExtendedAttributes(path: file).set("user.mam.hint", string: "x")
        #expect(chmod(file, 0o600) == 0)
        #expect(!watch.drain().contains(.directories), "a file made or changed inside changes no inherited owner")
        try ExtendedAttributes(path: scratch.file("d")).set("user.mam.owner", string: "x")
        #expect(watch.drain().contains(.directories), "tag set")
        #expect(!watch.drain().contains(.directories), "the queue is empty once read")
        #expect(chmod(scratch.file("d"), 0o700) == 0)
        #expect(watch.drain().contains(.directories), "mode changed")
        #expect(rename(scratch.file("d"), scratch.file("other/d")) == 0)
        #expect(watch.drain().contains(.directories), "moved")
        // The kernel reports a removed directory once nothing holds it (here, the descriptor).
        #expect(close(directory) == 0)
        #expect(unlink(scratch.file("other/d/file")) == 0 && rmdir(scratch.file("other/d")) == 0)
        #expect(watch.drain().contains(.directories), "removed")
    }

    @Test("A readable descriptor is marked directly; after unwatchAll nothing is reported")
    func readableDescriptorAndFlush() throws {
        let scratch = try ScratchDirectory()
        #expect(mkdir(scratch.file("d"), 0o755) == 0)
        let directory = try FileDescriptor.open(scratch.file("d"), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let watch = try DirectoryChangeWatch()
        try watch.watch(directory.rawValue, pathOnly: false)
        #expect(chmod(scratch.file("d"), 0o700) == 0)
        #expect(watch.drain().contains(.directories))
        watch.unwatchAll()
        #expect(watch.marksPlaced == 0)
        #expect(chmod(scratch.file("d"), 0o755) == 0)
        #expect(!watch.drain().contains(.directories))
    }

    @Test("A mount and an unmount in the watch's namespace are reported at once, and nothing else",
          .enabled(if: PrivateMountNamespace.isAvailable, "unshares a mount namespace and bind-mounts a scratch directory"))
    func reportsMountTableChanges() throws {
        let scratch = try ScratchDirectory()
        #expect(mkdir(scratch.file("a"), 0o755) == 0 && mkdir(scratch.file("b"), 0o755) == 0)
        // The mount table changes only when this test changes it.
        let (seen, mountedHere, mountedOutside) = try PrivateMountNamespace.run {
            () throws -> ([DirectoryChangeWatch.Changes], Bool, Bool) in
            let watch = try DirectoryChangeWatch()
            var seen = [watch.drain()]
            guard mount(scratch.file("a"), scratch.file("b"), nil, UInt(MS_BIND), nil) == 0 else { throw Errno.current }
            seen.append(watch.drain())
            let mountedHere = FuseMounts.isMounted(scratch.file("b"), in: "/proc/thread-self/mountinfo")
            let mountedOutside = FuseMounts.isMounted(scratch.file("b"), in: "/proc/self/mountinfo")
            guard umount2(scratch.file("b"), 0) == 0 else { throw Errno.current }
            seen.append(watch.drain())
            seen.append(watch.drainChanges() ? .mountTable : [])
            return (seen, mountedHere, mountedOutside)
        }
        #expect(seen == [[], .mountTable, .mountTable, []], "before, mounted, unmounted, after")
        #expect(mountedHere && !mountedOutside, "the bind mount is in the thread's namespace alone")
    }

    @Test("A mark of a file, or of a descriptor that is not open, fails with the kernel's errno")
    func refusesWhatIsNotADirectory() throws {
        let scratch = try ScratchDirectory()
        let file = try FileDescriptor.open(try scratch.write("f", [1]), O_RDONLY | O_CLOEXEC)
        let watch = try DirectoryChangeWatch()
        #expect(throws: Errno(rawValue: ENOTDIR)) { try watch.watch(file.rawValue, pathOnly: false) }
        #expect(throws: Errno(rawValue: ENOENT)) { try watch.watch(1_000_000, pathOnly: true) }
        #expect(watch.marksPlaced == 0)
    }

    @Test("Local disk filesystems notify every change; procfs is not counted as one")
    func filesystemsThatNotify() throws {
        let scratch = try ScratchDirectory()
        let local = try FileDescriptor.open(scratch.path, Self.pathOnly | O_DIRECTORY | O_CLOEXEC)
        let proc = try FileDescriptor.open("/proc/self", Self.pathOnly | O_DIRECTORY | O_CLOEXEC)
        #expect(try FilesystemType.magic(of: proc.rawValue) == 0x9FA0)
        #expect(!FilesystemType.changesAreNotified(on: proc.rawValue))
        // /var/tmp is on the machine's disk: ext4, XFS or Btrfs on the machines the tests run on.
        let magic = try FilesystemType.magic(of: local.rawValue)
        #expect(FilesystemType.changesAreNotified(on: local.rawValue), "f_type \(String(magic, radix: 16))")
        #expect(!FilesystemType.changesAreNotified(on: -1))
    }
}
