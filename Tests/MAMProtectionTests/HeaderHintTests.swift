import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMSystem
import MAMTestSupport

/// The header hint (`user.mam.header`): its encoding, and every writer of a header keeping it
/// equal to the header it wrote (or absent from an untagged file).
@Suite("Header hint")
struct HeaderHintTests {
    private static let secondId = "5d6e7f80-0000-4000-8000-000000000003"

    /// The hint of `path` as raw bytes; nil when it has none.
    private func rawHint(_ path: String) -> [UInt8]? {
        (try? ExtendedAttributes(path: path).get(HeaderHint.attributeName)) ?? nil
    }

    private func header(_ path: String) throws -> ProtectedFileHeader? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw MAMError.fromErrno(path) }
        defer { close(fd) }
        return try ProtectedFileHeader.read(fd: fd)
    }

    private func decode(_ bytes: [UInt8]) -> HeaderSummary? {
        bytes.withUnsafeBytes { HeaderHint.decode($0) }
    }

    @Test("a summary encodes as version, flags and owner, and decodes back; the length is the header's")
    func roundTrip() throws {
        let encrypted = HeaderSummary(owner: StateFixture.managedId, isEncrypted: true)
        #expect(HeaderHint.encode(encrypted) == [1, 1] + Array(StateFixture.managedId.utf8))
        #expect(decode(HeaderHint.encode(encrypted)) == encrypted)
        #expect(encrypted.length == 13 + 36 + 80)
        let plain = HeaderSummary(owner: "", isEncrypted: false)
        #expect(HeaderHint.encode(plain) == [1, 0])
        #expect(decode([1, 0]) == plain)
        #expect(plain.length == 13)
        #expect(try ProtectedFileHeader(plainOwner: "Alice@Contoso.com").summary.length == ProtectedFileHeader(plainOwner: "Alice@Contoso.com").length)
    }

    @Test("values of another version, with unknown flags, a non-canonical or invalid owner, an encrypted file without owner, or the wrong length decode to nothing")
    func malformed() {
        let owner = Array(StateFixture.managedId.utf8)
        #expect(decode([]) == nil)
        #expect(decode([1]) == nil)
        #expect(decode([2, 1] + owner) == nil, "unknown version")
        #expect(decode([1, 2] + owner) == nil, "sparse is not a hint flag")
        #expect(decode([1, 0x81] + owner) == nil, "unknown flag")
        #expect(decode([1, 1]) == nil, "encrypted without owner")
        #expect(decode([1, 1] + Array("Alice@Contoso.com".utf8)) == nil, "not canonical (lowercase)")
        #expect(decode([1, 0, 0xff, 0xfe]) == nil, "not UTF-8")
        #expect(decode([1, 0] + [UInt8](repeating: 0x61, count: 256)) == nil, "owner longer than 255 bytes")
        #expect(decode([1, 0] + [UInt8](repeating: 0x61, count: 255)) != nil)
    }

    @Test("encrypt in place, re-owning to another managed account, protecting for unmanaged and decrypt each leave the hint of the header they wrote, or none on an untagged file")
    func writersKeepTheHint() throws {
        let f = try StateFixture()
        let bytes = randomBytes(10_000, seed: 3)
        let p = try f.write("doc.bin", bytes)
        #expect(rawHint(p) == nil)

        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedId)
        #expect(rawHint(p) == [1, 1] + Array(StateFixture.managedId.utf8))
        #expect(rawHint(p).flatMap(decode) == (try header(p))?.summary)

        // Managed to managed (the first account unenrolled, its keys kept) rewraps the file
        // key and copies the other attributes: the hint must name the new owner, not the
        // copied old one.
        try f.context.enrollment.unenroll(StateFixture.managedId, wipe: false, roots: [])
        try f.context.enrollment.enroll(accountId: Self.secondId, upn: "bob@contoso.com", policy: .demoEncrypting)
        try ExtendedAttributes(path: p).set("user.note", Array("kept".utf8))
        try f.context.files.protect(path: p, accountId: Self.secondId)
        #expect(try header(p)?.owner == Self.secondId)
        #expect(rawHint(p) == [1, 1] + Array(Self.secondId.utf8))
        #expect(try ExtendedAttributes(path: p).get("user.note") == Array("kept".utf8))

        try f.context.files.protect(path: p, accountId: "")
        #expect(try header(p)?.isEncrypted == false)
        #expect(rawHint(p) == [1, 0])

        try f.context.files.decryptFile(path: p)
        #expect(try header(p) == nil)
        #expect(rawHint(p) == nil, "an untagged file has no hint (the old one is not copied)")
        #expect(try f.read(p) == bytes)
    }

    @Test("encrypting into an output file and a content written through ProtectedFileContent store the hint; a nil header removes a stale one")
    func contentWriterAndRemoval() throws {
        let f = try StateFixture()
        let p = try f.write("src", randomBytes(5000, seed: 4))
        let out = f.path("out")
        try f.context.files.encryptFile(path: p, forAccountId: StateFixture.managedId, output: out)
        #expect(rawHint(out) == [1, 1] + Array(StateFixture.managedId.utf8))
        #expect(rawHint(p) == nil)

        let fd = open(p, O_RDWR)
        #expect(fd >= 0)
        defer { close(fd) }
        HeaderHint.store(try ProtectedFileHeader(plainOwner: ""), fd: fd)
        #expect(rawHint(p) == [1, 0])
        HeaderHint.store(nil, fd: fd)
        #expect(rawHint(p) == nil)
        HeaderHint.store(nil, fd: fd)
        #expect(rawHint(p) == nil, "removing an absent hint is not an error")
    }

    @Test("read by directory and name (and isPresent) finds the hint of a file whose name is not UTF-8, and not through a symlink")
    func readByName() throws {
        let f = try StateFixture()
        let name: [CChar] = [0x66, -0x3f, 0x28, 0]  // "f\xc1(": not UTF-8
        let path = Array((f.work + "/").utf8CString.dropLast()) + name
        let fd = path.withUnsafeBufferPointer { open($0.baseAddress!, O_CREAT | O_RDWR, 0o600) }
        #expect(fd >= 0)
        HeaderHint.store(try ProtectedFileHeader(plainOwner: StateFixture.managedId), fd: fd)
        close(fd)
        let g = try f.write("g", [1])
        let gfd = open(g, O_RDWR)
        HeaderHint.store(try ProtectedFileHeader(plainOwner: ""), fd: gfd)
        close(gfd)
        #expect(symlink("g", f.path("link")) == 0)
        let dir = open(f.work, O_RDONLY | O_DIRECTORY)
        #expect(dir >= 0)
        defer { close(dir) }
        #expect(HeaderHint.read(directoryFD: dir, name: name) == HeaderSummary(owner: StateFixture.managedId, isEncrypted: false))
        #expect(HeaderHint.read(directoryFD: dir, name: "g") == HeaderSummary(owner: "", isEncrypted: false))
        #expect(HeaderHint.read(directoryFD: dir, name: "link") == nil, "a final symlink is not followed")
        #expect(HeaderHint.read(directoryFD: dir, name: "missing") == nil)
        #expect(HeaderHint.isPresent(directoryFD: dir, name: name) && HeaderHint.isPresent(directoryFD: dir, name: "g"))
        _ = try f.write("bare", [2])
        #expect(!HeaderHint.isPresent(directoryFD: dir, name: "bare"), "a file without a hint")
        #expect(!HeaderHint.isPresent(directoryFD: dir, name: "link"), "a final symlink is not followed")
        #expect(!HeaderHint.isPresent(directoryFD: dir, name: "missing"))
    }
}
