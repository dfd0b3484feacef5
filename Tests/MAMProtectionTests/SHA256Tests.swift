import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// SHA-256 through OpenSSL: the FIPS 180-2 vectors, and a file streamed in chunks.
@Suite("SHA-256")
struct SHA256Tests {
    @Test("the FIPS 180-2 vectors for \"abc\" and the empty message")
    func knownVectors() throws {
        let abc = try Array("abc".utf8).withUnsafeBytes { try SHA256.digest($0) }
        #expect(SHA256.hex(abc) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let empty = try [UInt8]().withUnsafeBytes { try SHA256.digest($0) }
        #expect(SHA256.hex(empty) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("a file larger than one chunk digests as sha256sum does, and the offset is not moved")
    func fileAgreesWithSha256sum() throws {
        let directory = try TempDirectory(prefix: "mamfs-sha")
        let path = directory.file("data")
        var random = SplitMix64(seed: 7)
        let bytes = (0..<200_003).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        let digest = SHA256.hex(try SHA256.digest(fileDescriptor: fd))
        let expected = try shell("sha256sum \(shellQuote(path))").out.prefix(64)
        #expect(digest == String(expected))
        #expect(lseek(fd, 0, SEEK_CUR) == 0)
    }
}
