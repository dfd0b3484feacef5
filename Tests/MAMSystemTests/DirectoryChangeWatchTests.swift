import Foundation
import Glibc
import MAMSystem
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
        #expect(!watch.drainChanges())

        let file = try scratch.write("d/file", [1])
        try ExtendedAttributes(path: file).set("user.mam.hint", string: "x")
        #expect(chmod(file, 0o600) == 0)
        #expect(!watch.drainChanges(), "a file made or changed inside changes no inherited owner")
        try ExtendedAttributes(path: scratch.file("d")).set("user.mam.owner", string: "x")
        #expect(watch.drainChanges(), "tag set")
        #expect(!watch.drainChanges(), "the queue is empty once read")
        #expect(chmod(scratch.file("d"), 0o700) == 0)
        #expect(watch.drainChanges(), "mode changed")
        #expect(rename(scratch.file("d"), scratch.file("other/d")) == 0)
        #expect(watch.drainChanges(), "moved")
        // The kernel reports a removed directory once nothing holds it (here, the descriptor).
        #expect(close(directory) == 0)
        #expect(unlink(scratch.file("other/d/file")) == 0 && rmdir(scratch.file("other/d")) == 0)
        #expect(watch.drainChanges(), "removed")
    }

    @Test("A readable descriptor is marked directly; after unwatchAll nothing is reported")
    func readableDescriptorAndFlush() throws {
        let scratch = try ScratchDirectory()
        #expect(mkdir(scratch.file("d"), 0o755) == 0)
        let directory = try FileDescriptor.open(scratch.file("d"), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let watch = try DirectoryChangeWatch()
        try watch.watch(directory.rawValue, pathOnly: false)
        #expect(chmod(scratch.file("d"), 0o700) == 0)
        #expect(watch.drainChanges())
        watch.unwatchAll()
        #expect(watch.marksPlaced == 0)
        #expect(chmod(scratch.file("d"), 0o755) == 0)
        #expect(!watch.drainChanges())
    }

    @Test("A mount and an unmount in this namespace are reported at once",
          .enabled(if: geteuid() == 0, "bind-mounts a scratch directory"))
    func reportsMountTableChanges() throws {
        let scratch = try ScratchDirectory()
        #expect(mkdir(scratch.file("a"), 0o755) == 0 && mkdir(scratch.file("b"), 0o755) == 0)
        let watch = try DirectoryChangeWatch()
        #expect(!watch.drainChanges())
        #expect(try Self.run("/bin/mount", ["--bind", scratch.file("a"), scratch.file("b")]) == 0)
        let mounted = watch.drainChanges()
        let unmounted = try Self.run("/bin/umount", [scratch.file("b")]) == 0
        #expect(mounted, "mounted")
        #expect(unmounted)
        #expect(watch.drainChanges(), "unmounted")
        #expect(!watch.drainChanges())
    }

    static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
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
