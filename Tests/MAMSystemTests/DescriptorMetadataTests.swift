import Glibc
import MAMSystem
import Testing

/// `SystemCall.chmod(fd:mode:)` and `SystemCall.setTimes(fd:_:)` on O_PATH descriptors: they
/// change the object the descriptor refers to, a symlink itself and never its target.
@Suite struct DescriptorMetadataTests {
    private func statOf(_ path: String) -> stat {
        var st = stat()
        _ = lstat(path, &st)
        return st
    }

    @Test func chmodOfPathDescriptorChangesTheFileAndDirectory() throws {
        let scratch = try ScratchDirectory()
        let file = try scratch.write("f", [1])
        #expect(mkdir(scratch.file("d"), 0o755) == 0)
        for (path, mode) in [(file, mode_t(0o4640)), (scratch.file("d"), mode_t(0o1750))] {
            let fd = try FileDescriptor.openPath(path)
            try SystemCall.chmod(fd: fd.rawValue, mode: mode)
            #expect(statOf(path).st_mode & 0o7777 == mode, "\(path)")
        }
    }

    @Test func chmodOfSymlinkDescriptorLeavesTheTarget() throws {
        let scratch = try ScratchDirectory()
        let target = try scratch.write("target", [1])
        #expect(chmod(target, 0o600) == 0)
        #expect(symlink(target, scratch.file("link")) == 0)
        let fd = try FileDescriptor.openPath(scratch.file("link"), flags: O_NOFOLLOW)
        #expect(throws: Errno(rawValue: EOPNOTSUPP)) { try SystemCall.chmod(fd: fd.rawValue, mode: 0o777) }
        #expect(statOf(target).st_mode & 0o7777 == 0o600)
    }

    @Test func setTimesOfPathDescriptorSetsEachSideOrOmitsIt() throws {
        let scratch = try ScratchDirectory()
        let file = try scratch.write("f", [1])
        let fd = try FileDescriptor.openPath(file)
        try SystemCall.setTimes(fd: fd.rawValue, (timespec(tv_sec: 1_000, tv_nsec: 5), timespec(tv_sec: 2_000, tv_nsec: 7)))
        var st = statOf(file)
        #expect(st.st_atim.tv_sec == 1_000 && st.st_atim.tv_nsec == 5)
        #expect(st.st_mtim.tv_sec == 2_000 && st.st_mtim.tv_nsec == 7)
        // UTIME_OMIT keeps the access time; the modification time changes alone.
        try SystemCall.setTimes(fd: fd.rawValue, (timespec(tv_sec: 0, tv_nsec: SystemConstants.utimeOmit), timespec(tv_sec: 3_000, tv_nsec: 0)))
        st = statOf(file)
        #expect(st.st_atim.tv_sec == 1_000 && st.st_mtim.tv_sec == 3_000)
    }

    @Test func setTimesOfSymlinkDescriptorSetsTheLinkNotTheTarget() throws {
        let scratch = try ScratchDirectory()
        let target = try scratch.write("target", [1])
        #expect(symlink(target, scratch.file("link")) == 0)
        let before = statOf(target).st_mtim.tv_sec
        let fd = try FileDescriptor.openPath(scratch.file("link"), flags: O_NOFOLLOW)
        try SystemCall.setTimes(fd: fd.rawValue, (timespec(tv_sec: 4_000, tv_nsec: 0), timespec(tv_sec: 5_000, tv_nsec: 0)))
        #expect(statOf(scratch.file("link")).st_mtim.tv_sec == 5_000)
        #expect(statOf(target).st_mtim.tv_sec == before)
    }
}
