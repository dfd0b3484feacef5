import Glibc
import MAMSystem
import Testing

@Suite struct ExtendedAttributesTests {
    /// A file in a scratch directory with user xattrs, or nil (after a message) where the
    /// filesystem has none.
    private func fileWithUserAttributes(_ scratch: ScratchDirectory) throws -> String? {
        let path = try scratch.write("f", [0])
        let failure: Errno?
        do {
            try ExtendedAttributes(path: path).set("user.mamsystem.probe", [1])
            failure = nil
        } catch {
            failure = error
        }
        if failure == .notSupported {
            print("skipped: \(scratch.path) has no user extended attributes (ENOTSUP)")
            return nil
        }
        if let failure { throw failure }
        return path
    }

    @Test func valueLargerThanInitialBufferComesBackWhole() throws {
        let scratch = try ScratchDirectory()
        guard let path = try fileWithUserAttributes(scratch) else { return }
        // Above the 256-byte first try, within what ext4 keeps in one block.
        let value = (0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
        try ExtendedAttributes(path: path).set("user.big", value)
        #expect(try ExtendedAttributes(path: path).get("user.big") == value)
        let descriptor = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        let fd = descriptor.rawValue
        #expect(try ExtendedAttributes(descriptor: fd).get("user.big") == value)
        let pathOnly = try FileDescriptor.openPath(path)
        let pathOnlyFD = pathOnly.rawValue
        #expect(try ExtendedAttributes(descriptorPath: pathOnlyFD).get("user.big") == value)
    }

    @Test func missingAttributeIsNilAndRemoveOfMissingThrowsENODATA() throws {
        let scratch = try ScratchDirectory()
        guard let path = try fileWithUserAttributes(scratch) else { return }
        let attributes = ExtendedAttributes(path: path)
        #expect(try attributes.get("user.none") == nil)
        #expect(throws: Errno.noData) { try attributes.remove("user.none") }
        #expect(throws: Errno.noSuchFile) { _ = try ExtendedAttributes(path: scratch.file("missing")).get("user.x") }
    }

    @Test func namesListsEverySetAttributeAndRemoveDeletes() throws {
        let scratch = try ScratchDirectory()
        guard let path = try fileWithUserAttributes(scratch) else { return }
        let attributes = ExtendedAttributes(path: path)
        let many = (0..<40).map { "user.name-with-some-length-\($0)" }
        for name in many { try attributes.set(name, string: name) }
        let listed = Set(try attributes.names())
        #expect(listed.isSuperset(of: many))
        #expect(listed.contains("user.mamsystem.probe"))
        try attributes.remove(many[0])
        #expect(try attributes.get(many[0]) == nil)
        #expect(try attributes.string(many[1]) == many[1])
    }

    @Test func noFollowVariantReadsTheLinkNotTheTarget() throws {
        let scratch = try ScratchDirectory()
        guard let path = try fileWithUserAttributes(scratch) else { return }
        #expect(symlink(path, scratch.file("link")) == 0)
        #expect(try ExtendedAttributes(path: scratch.file("link")).get("user.mamsystem.probe") == [1])
        // Symlinks cannot carry user.* attributes: the l-variant answers for the link itself.
        #expect(try ExtendedAttributes(path: scratch.file("link"), followSymlink: false).get("user.mamsystem.probe") == nil)
    }
}
