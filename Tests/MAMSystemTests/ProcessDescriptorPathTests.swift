import Glibc
import MAMSystem
import Testing

@Suite struct ProcessDescriptorPathTests {
    @Test func pathNamesTheDescriptor() throws {
        #expect(ProcessDescriptorPath.path(of: 7) == "/proc/self/fd/7")
        #expect(ProcessDescriptorPath.path(of: 0) == "/proc/self/fd/0")
        #expect(ProcessDescriptorPath.path(of: 1_234_567) == "/proc/self/fd/1234567")
        #expect(ProcessDescriptorPath.path(of: Int32.max) == "/proc/self/fd/2147483647")
        #expect(ProcessDescriptorPath.path(of: -1) == "/proc/self/fd/-1")
        #expect(ProcessDescriptorPath.path(of: Int32.min) == "/proc/self/fd/-2147483648")
    }

    @Test func currentPathOfLiveFileIsNotDeleted() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1])
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        let current = try ProcessDescriptorPath.currentPath(of: descriptor.rawValue)
        #expect(current.path == path)
        #expect(!current.deleted)
    }

    @Test func currentPathOfUnlinkedFileStripsSuffixOnce() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1])
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        #expect(unlink(path) == 0)
        let current = try ProcessDescriptorPath.currentPath(of: descriptor.rawValue)
        #expect(current.path == path)
        #expect(current.deleted)
    }

    @Test func currentPathOfUnlinkedFileNamedWithSuffixKeepsItsOwnSuffix() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f (deleted)", [1])
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        #expect(unlink(path) == 0)
        let current = try ProcessDescriptorPath.currentPath(of: descriptor.rawValue)
        #expect(current.path == path)
        #expect(current.deleted)
    }

    @Test func currentPathOfClosedDescriptorThrows() throws {
        #expect(throws: Errno.noSuchFile) { _ = try ProcessDescriptorPath.currentPath(of: 1_000_000) }
    }
}
