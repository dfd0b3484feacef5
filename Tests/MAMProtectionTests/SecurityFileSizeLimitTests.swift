import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMTestSupport

/// The largest plaintext size of each content kind is the largest whose stored size still fits
/// in off_t; offsets and sizes past it are EFBIG (negative ones EINVAL), never an arithmetic trap.
@Suite("Security: file size limits of the format")
struct SecurityFileSizeLimitTests {
    static func errnoOf(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as MAMError {
            return error.errno
        } catch {
            return -1
        }
    }

    @Test("the largest plaintext of an encrypted body is the largest valid body that fits")
    func largestEncryptedPlaintext() throws {
        for limit: Int64 in [0, 28, 29, 4124, 4125, 4152, 4153, 1 << 40, Int64.max, Int64.max - 4124, Int64.max - 200] {
            let size = BlockLayout.largestPlaintextSize(bodyLength: limit)
            #expect(size >= 0)
            let body = try #require(BlockLayout.storedBodyLength(plaintextSize: size), "limit \(limit)")
            #expect(body <= limit, "limit \(limit): plaintext \(size) needs \(body)")
            if size < Int64.max {
                // One more byte no longer fits (or overflows off_t).
                let next = BlockLayout.storedBodyLength(plaintextSize: size + 1)
                #expect(next == nil || next! > limit, "limit \(limit): plaintext \(size + 1) would fit")
            }
        }
        #expect(BlockLayout.storedBodyLength(plaintextSize: Int64.max) == nil)
        #expect(BlockLayout.storedBodyLength(plaintextSize: -1) == nil)
    }

    @Test("maximumPlaintextSize: the stored size of the maximum fits in off_t, one more does not",
          arguments: ContentKind.allCases)
    func maximumFitsInOffT(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let file = try BackingFile(path: dir.file("f"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(kind, file: file, accountKey: try SymmetricKey.random())
        let maximum = content.maximumPlaintextSize
        #expect(maximum > Int64.max / 2)
        let stored = try #require(ProtectedFileContent.checkedStoredSize(plaintextSize: maximum, header: content.header))
        #expect(stored <= Int64.max)
        if maximum < Int64.max {
            #expect(ProtectedFileContent.checkedStoredSize(plaintextSize: maximum + 1, header: content.header) == nil)
        }
        if kind == .encrypted {
            #expect(maximum < Int64.max - Int64.max / 4124 * 28 + 4096)
        }
    }

    @Test("write, truncate and allocate past the maximum are EFBIG; negative ones EINVAL; the file is unchanged",
          arguments: ContentKind.allCases)
    func pastTheMaximumIsEFBIG(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let file = try BackingFile(path: dir.file("f"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(kind, file: file, accountKey: try SymmetricKey.random())
        try FormatFixture.write(content, Array("hello world".utf8), at: 0)
        let before = try FormatFixture.readFile(dir.file("f"))
        let maximum = content.maximumPlaintextSize
        let byte: [UInt8] = [1]
        let page = [UInt8](repeating: 2, count: 4096)
        for offset in [Int64.max, Int64.max - 1, Int64.max - 4095, maximum, maximum - 4095] {
            #expect(Self.errnoOf { try FormatFixture.write(content, page, at: offset) } == EFBIG, "write at \(offset)")
        }
        #expect(Self.errnoOf { try FormatFixture.write(content, byte, at: maximum) } == EFBIG)
        for size in [Int64.max, Int64.max - 1, min(maximum, Int64.max - 1) + 1] {
            #expect(Self.errnoOf { try content.truncate(to: size) } == EFBIG, "truncate to \(size)")
            #expect(Self.errnoOf { try content.allocate(offset: size - 1, length: 1) } == EFBIG, "allocate at \(size - 1)")
        }
        #expect(Self.errnoOf { try content.allocate(offset: 1, length: Int64.max) } == EFBIG)
        #expect(Self.errnoOf { try content.allocate(offset: Int64.max, length: Int64.max) } == EFBIG)
        #expect(Self.errnoOf { try content.allocate(offset: -1, length: 10) } == EINVAL)
        #expect(Self.errnoOf { try content.allocate(offset: 0, length: 0) } == EINVAL)
        #expect(Self.errnoOf { try content.allocate(offset: 0, length: -5) } == EINVAL)
        #expect(Self.errnoOf { try content.truncate(to: -1) } == EINVAL)
        #expect(Self.errnoOf { try FormatFixture.write(content, byte, at: -1) } == EINVAL)
        #expect(try FormatFixture.readFile(dir.file("f")) == before)
        // Reads far past the end are empty, not a trap.
        #expect(try FormatFixture.read(content, at: Int64.max - 1, count: 4096).isEmpty)
        #expect(try FormatFixture.read(content, at: Int64.max, count: 1 << 20).isEmpty)
        // Allocation inside the limit works and reads back as zeros.
        try content.allocate(offset: 11, length: 5000)
        #expect(try content.plaintextSize() == 5011)
        #expect(try FormatFixture.read(content, at: 0, count: 12) == Array("hello world".utf8) + [0])
    }
}
