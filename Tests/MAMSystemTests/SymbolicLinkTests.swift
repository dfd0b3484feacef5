import Glibc
import MAMSystem
import Testing

@Suite struct SymbolicLinkTests {
    @Test func longTargetComesBackWhole() throws {
        let scratch = try ScratchDirectory()
        let target = (0..<300).map { "component\($0 % 10)" }.joined(separator: "/")
        #expect(target.utf8.count > 3_000)
        #expect(symlink(target, scratch.file("link")) == 0)
        #expect(try SymbolicLink.readLink(scratch.file("link")) == Array(target.utf8))
        let directory = try FileDescriptor.openPath(scratch.path, flags: O_DIRECTORY)
        let fd = directory.rawValue
        #expect(try SymbolicLink.readLinkString(atFD: fd, name: "link") == target)
    }

    @Test func targetOfExactlyInitialBufferSizeIsNotCut() throws {
        let scratch = try ScratchDirectory()
        for length in [255, 256, 257, 512] {
            let target = String(repeating: "t", count: length)
            #expect(symlink(target, scratch.file("l\(length)")) == 0)
            #expect(try SymbolicLink.readLink(scratch.file("l\(length)")).count == length)
        }
    }

    @Test func nonUTF8TargetKeepsItsBytes() throws {
        let scratch = try ScratchDirectory()
        let target: [CChar] = [0x61, -1, 0x62, 0]
        #expect(symlink(target, scratch.file("link")) == 0)
        #expect(try SymbolicLink.readLink(scratch.file("link")) == [0x61, 0xFF, 0x62])
    }

    @Test func readLinkOfRegularFileThrowsEINVAL() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1])
        #expect(throws: Errno.invalidArgument) { _ = try SymbolicLink.readLink(path) }
    }
}
