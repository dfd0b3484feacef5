import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMTestSupport

/// `UntaggedPrefix`: which writes would make an untagged file start with the magic.
@Suite("Untagged prefix")
struct UntaggedPrefixTests {
    private let magic = ProtectedFileHeader.magic
    private let plainHeader = try! ProtectedFileHeader(plainOwner: StateFixture.managedId).encoded()

    private func wouldTag(_ existing: [UInt8], _ bytes: [UInt8], at offset: Int64) throws -> Bool {
        let dir = try TempDirectory()
        let path = dir.file("f")
        try Data(existing).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        return try bytes.withUnsafeBytes { try UntaggedPrefix.writeWouldTag(fd: fd, writing: $0, at: offset) }
    }

    @Test("a whole header written at offset 0 of an empty or a plain file would tag it")
    func wholeHeader() throws {
        #expect(try wouldTag([], plainHeader, at: 0))
        #expect(try wouldTag(Array("plain text, long enough".utf8), plainHeader, at: 0))
        #expect(try wouldTag(Array("plain text, long enough".utf8), magic, at: 0))
    }

    @Test("completing the magic: the last byte written after the first seven, a file of seven appended to, one byte in the middle")
    func completing() throws {
        #expect(try wouldTag(Array(magic[0..<7]) + Array("xyz".utf8), [magic[7]], at: 7))
        #expect(try wouldTag(Array(magic[0..<7]), [magic[7]] + Array("rest".utf8), at: 7))
        var oneWrong = magic
        oneWrong[3] = 0x20
        #expect(try wouldTag(oneWrong, [magic[3]], at: 3))
        #expect(try wouldTag(Array(magic[0..<1]), Array(magic[1...]), at: 1))
    }

    @Test("writes that leave the first 8 bytes other than the magic are allowed: elsewhere, short, past a gap, empty, at 8")
    func allowed() throws {
        let text = Array("plain text, long enough".utf8)
        #expect(try !wouldTag(text, Array(magic[0..<7]), at: 0))
        #expect(try !wouldTag(text, magic, at: 1))
        #expect(try !wouldTag(text, magic, at: 8))
        #expect(try !wouldTag(Array(magic[0..<7]), [], at: 7))
        // A gap before the write reads as zeros, which the magic does not contain.
        #expect(try !wouldTag(Array(magic[0..<6]), [magic[7]], at: 7))
        #expect(try !wouldTag([], Array(magic[1...]), at: 1))
        var almost = magic
        almost[7] = 0x0B
        #expect(try !wouldTag(text, almost, at: 0))
    }

    @Test("an unreadable descriptor is an error, not a guess")
    func unreadable() throws {
        let dir = try TempDirectory()
        let fd = open(dir.file("w"), O_WRONLY | O_CREAT, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(throws: MAMError.self) {
            try magic.withUnsafeBytes { try UntaggedPrefix.writeWouldTag(fd: fd, writing: $0, at: 0) }
        }
    }
}
