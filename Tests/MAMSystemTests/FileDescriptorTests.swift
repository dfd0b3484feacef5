import Glibc
import MAMSystem
import Testing

@Suite struct FileDescriptorTests {
    @Test func descriptorClosesAtScopeExit() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1, 2, 3])
        var raw: Int32 = -1
        do {
            let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
            raw = descriptor.rawValue
            #expect(isOpen(raw))
        }
        #expect(raw >= 0)
        #expect(descriptors(of: path) == 0, "closed at scope exit")
    }

    @Test func takeReleasesWithoutClosing() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1])
        let raw: Int32
        do {
            let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
            raw = descriptor.take()
        }
        #expect(isOpen(raw))
        #expect(close(raw) == 0)
    }

    @Test("pathDescriptor: the O_PATH descriptor of a just-made file, by name while the name still leads to it, else the file itself through /proc, whatever the name leads to now")
    func pathDescriptorOfAJustMadeFile() throws {
        let scratch = try ScratchDirectory()
        let directory = try FileDescriptor.openPath(scratch.path, flags: O_DIRECTORY)
        func check(_ swap: (String) throws -> Void) throws {
            try scratch.write("f", [1, 2, 3])
            let file = try FileDescriptor.open(scratch.file("f"), O_RDWR | O_CLOEXEC)
            let made = try file.stat()
            try swap(scratch.file("f"))
            let found = try FileDescriptor.pathDescriptor(of: file.rawValue, named: "f", in: directory.rawValue, statted: made)
            let st = try found.stat()
            #expect(st.st_ino == made.st_ino && st.st_dev == made.st_dev)
            #expect(fcntl(found.rawValue, F_GETFL) & SystemConstants.pathOnly != 0, "an O_PATH descriptor")
            #expect(fcntl(found.rawValue, F_GETFD) & FD_CLOEXEC != 0)
            _ = unlink(scratch.file("f"))
        }
        try check { _ in }
        // Another file renamed over the name.
        try check { path in
            try scratch.write("g", [9])
            #expect(rename(scratch.file("g"), path) == 0)
        }
        // A symlink put in its place (not followed, not taken).
        try check { path in
            #expect(unlink(path) == 0 && symlink(scratch.file("elsewhere"), path) == 0)
        }
        // The name removed.
        try check { path in #expect(unlink(path) == 0) }
    }

    @Test func openOfMissingFileThrowsENOENT() throws {
        let scratch = try ScratchDirectory()
        #expect(throws: Errno.noSuchFile) { _ = try FileDescriptor.open(scratch.file("missing"), O_RDONLY) }
    }

    @Test func preadReadsWholeBufferAndCountsShortAtEOF() throws {
        let scratch = try ScratchDirectory()
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let path = try scratch.write("f", bytes)
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let whole = try buffer.withUnsafeMutableBytes { b in try descriptor.pread(into: b, at: 100) }
        #expect(whole == 4096)
        #expect(buffer == Array(bytes[100..<4196]))
        let tail = try buffer.withUnsafeMutableBytes { b in try descriptor.pread(into: b, at: 9_000) }
        #expect(tail == 1_000)
        #expect(Array(buffer[0..<1_000]) == Array(bytes[9_000...]))
        let past = try buffer.withUnsafeMutableBytes { b in try descriptor.pread(into: b, at: 20_000) }
        #expect(past == 0)
    }

    @Test func pwriteWritesEverythingAtOffset() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [])
        let descriptor = try FileDescriptor.open(path, O_RDWR | O_CLOEXEC)
        let bytes = [UInt8](repeating: 0xAB, count: 3 << 20)
        try bytes.withUnsafeBytes { b in try descriptor.pwrite(b, at: 5) }
        let size = try descriptor.size()
        #expect(size == Int64(bytes.count + 5))
        var back = [UInt8](repeating: 0, count: bytes.count + 5)
        let n = try back.withUnsafeMutableBytes { b in try SystemCall.pread(fd: descriptor.rawValue, into: b, at: 0) }
        #expect(n == back.count)
        #expect(Array(back[0..<5]) == [0, 0, 0, 0, 0])
        #expect(Array(back[5...]) == bytes)
    }

    @Test func pwriteToReadOnlyDescriptorThrowsEBADF() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1])
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        #expect(throws: Errno.badDescriptor) {
            try [UInt8(2)].withUnsafeBytes { b in try descriptor.pwrite(b, at: 0) }
        }
    }

    @Test func statWorksOnPathOnlyDescriptor() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1, 2, 3, 4])
        let descriptor = try FileDescriptor.openPath(path, flags: O_NOFOLLOW)
        let flags = fcntl(descriptor.rawValue, F_GETFL)
        #expect(flags & SystemConstants.pathOnly != 0)
        let size = try descriptor.size()
        #expect(size == 4)
        let reopened = try FileDescriptor.reopen(descriptor.rawValue, O_RDONLY | O_CLOEXEC)
        var buffer = [UInt8](repeating: 0, count: 8)
        let count = try buffer.withUnsafeMutableBytes { b in try reopened.pread(into: b, at: 0) }
        #expect(count == 4)
    }

    @Test func openBeneathRefusesSymlinkAndEscape() throws {
        let scratch = try ScratchDirectory()
        try scratch.write("f", [1])
        #expect(symlink("f", scratch.file("link")) == 0)
        let directory = try FileDescriptor.openPath(scratch.path, flags: O_DIRECTORY)
        let fd = directory.rawValue
        let plain: Errno?
        do {
            _ = try FileDescriptor.openBeneath(fd, "f", O_RDONLY)
            plain = nil
        } catch {
            plain = error
        }
        // Kernels before 5.6 have no openat2; the callers fall back to a component walk.
        if plain == .noSystemCall { return }
        #expect(plain == nil)
        #expect(throws: Errno.tooManySymbolicLinks) { _ = try FileDescriptor.openBeneath(fd, "link", O_RDONLY) }
        #expect(throws: Errno.crossDevice) { _ = try FileDescriptor.openBeneath(fd, "../x", O_RDONLY) }
    }
}
