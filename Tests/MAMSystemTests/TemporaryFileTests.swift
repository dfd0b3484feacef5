import Glibc
import MAMSystem
import Testing

@Suite struct TemporaryFileTests {
    @Test func unnamedFileAppearsOnlyWhenPublished() throws {
        let scratch = try ScratchDirectory()
        let directory = try FileDescriptor.open(scratch.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let made: Errno?
        do {
            _ = try TemporaryFile.createUnnamed(in: directory.rawValue)
            made = nil
        } catch {
            made = error
        }
        if let made, TemporaryFile.isUnavailable(made) {
            print("skipped: \(scratch.path) has no O_TMPFILE")
            return
        }
        let file = try TemporaryFile.createUnnamed(in: directory.rawValue)
        try [UInt8]([9, 8, 7]).withUnsafeBytes { b in try file.pwrite(b, at: 0) }
        var listing = try DirectoryIterator(duplicating: directory.rawValue)
        #expect(try listing.all().isEmpty)
        try TemporaryFile.publish(file.rawValue, in: directory.rawValue, as: "out")
        let st = try SystemCall.stat(in: directory.rawValue, "out")
        #expect(st.st_size == 3)
        #expect(st.st_mode & 0o777 == 0o600)
        let (fd, directoryFD) = (file.rawValue, directory.rawValue)
        #expect(throws: Errno.fileExists) { try TemporaryFile.publish(fd, in: directoryFD, as: "out") }
    }

    @Test func namedFileIsPrivateAndFilledIn() throws {
        let scratch = try ScratchDirectory()
        let made = try TemporaryFile.createNamed(template: scratch.file(".t.XXXXXX"))
        let path = made.path
        #expect(path.hasPrefix(scratch.file(".t.")))
        #expect(!path.hasSuffix("XXXXXX"))
        let st = try made.descriptor.stat()
        #expect(st.st_mode & 0o777 == 0o600)
        let descriptorFlags = fcntl(made.descriptor.rawValue, F_GETFD)
        #expect(descriptorFlags & FD_CLOEXEC != 0)
    }
}
