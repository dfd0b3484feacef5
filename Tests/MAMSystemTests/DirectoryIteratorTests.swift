import Glibc
import MAMSystem
import Testing

@Suite struct DirectoryIteratorTests {
    @Test func listsNonUTF8NamesAsTheirBytesWithTypes() throws {
        let scratch = try ScratchDirectory()
        let odd: [UInt8] = [0x66, 0xFF, 0xFE, 0x2E, 0x74]
        let directory = try FileDescriptor.open(scratch.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let made = try FileDescriptor.open(in: directory.rawValue, odd.map { CChar(bitPattern: $0) } + [0],
                                           O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600)
        _ = made
        #expect(mkdir(scratch.file("sub"), 0o700) == 0)
        #expect(symlink("x", scratch.file("link")) == 0)
        var iterator = try DirectoryIterator(duplicating: directory.rawValue)
        let entries = try iterator.all()
        #expect(entries.count == 3)
        let byName = Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0) })
        let file = try #require(byName[odd])
        #expect(file.type == UInt8(DT_REG) || file.type == UInt8(DT_UNKNOWN))
        #expect(file.cName == odd.map { CChar(bitPattern: $0) } + [0])
        #expect(byName[Array("sub".utf8)]?.type == UInt8(DT_DIR))
        #expect(byName[Array("link".utf8)]?.type == UInt8(DT_LNK))
        let fd = directory.rawValue
        #expect(isOpen(fd))
    }

    @Test func iteratorClosesItsStreamAtScopeExit() throws {
        let scratch = try ScratchDirectory()
        let directory = try FileDescriptor.open(scratch.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        // Counted by target, not in all: other tests' threads open and close descriptors meanwhile.
        #expect(descriptors(of: scratch.path) == 1)
        do {
            var iterator = try DirectoryIterator(duplicating: directory.rawValue)
            let first = try iterator.next()
            #expect(first == nil)
            #expect(descriptors(of: scratch.path) == 2)
        }
        #expect(descriptors(of: scratch.path) == 1)
    }

    @Test func adoptingANonDirectoryThrowsENOTDIRAndCloses() throws {
        let scratch = try ScratchDirectory()
        let path = try scratch.write("f", [1])
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        let raw = descriptor.rawValue
        var failure: Errno?
        do throws(Errno) {
            _ = try DirectoryIterator(adopting: descriptor)
        } catch {
            failure = error
        }
        #expect(failure == .notDirectory)
        #expect(raw >= 0)
        #expect(descriptors(of: path) == 0, "the adopted descriptor is closed")
    }
}
