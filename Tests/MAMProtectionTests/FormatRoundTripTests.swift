import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// Round trips and random access through ProtectedFileContent, for all three content kinds.
@Suite("Format round trips and random access")
struct FormatRoundTripTests {
    static let boundaryOffsets: [Int64] = [0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 12287, 12288, 12289, 12388]
    static let boundaryLengths: [Int] = [1, 2, 4095, 4096, 4097, 8191, 8192, 8193, 20000]

    @Test("reads at every block-boundary class return exactly the written bytes", arguments: ContentKind.allCases)
    func readsAtBoundaries(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 1)
        let data = FormatFixture.randomBytes(3 * 4096 + 100, using: &rng)
        do {
            let file = try BackingFile(path: dir.file("f"))
            defer { withExtendedLifetime(file) {} }
            let content = try FormatFixture.makeContent(kind, file: file, accountKey: key)
            try FormatFixture.write(content, data, at: 0)
        }
        let file = try BackingFile(path: dir.file("f"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.reopen(file, accountKey: key)
        #expect(try content.plaintextSize() == Int64(data.count))
        for offset in Self.boundaryOffsets {
            for length in Self.boundaryLengths {
                let got = try FormatFixture.read(content, at: offset, count: length)
                let lo = min(Int(offset), data.count)
                let hi = min(Int(offset) + length, data.count)
                #expect(got == Array(data[lo..<hi]), "offset \(offset) length \(length)")
            }
        }
        #expect(try FormatFixture.read(content, at: 1_000_000, count: 10).isEmpty)
    }

    @Test("writes across block boundaries modify exactly their range", arguments: ContentKind.allCases)
    func writesAcrossBoundaries(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 2)
        let base = FormatFixture.randomBytes(4 * 4096 + 33, using: &rng)
        for offset in Self.boundaryOffsets {
            for length in Self.boundaryLengths {
                let path = dir.file("w-\(offset)-\(length)")
                let file = try BackingFile(path: path)
                defer { withExtendedLifetime(file) {} }
                let content = try FormatFixture.makeContent(kind, file: file, accountKey: key)
                try FormatFixture.write(content, base, at: 0)
                let patch = FormatFixture.randomBytes(length, using: &rng)
                try FormatFixture.write(content, patch, at: offset)
                var expected = base
                let end = Int(offset) + length
                if end > expected.count { expected += [UInt8](repeating: 0, count: end - expected.count) }
                expected.replaceSubrange(Int(offset)..<end, with: patch)
                let reread = try FormatFixture.reopen(file, accountKey: key)
                #expect(try FormatFixture.readAll(reread) == expected, "offset \(offset) length \(length)")
                #expect(try FormatFixture.readFile(path).count == Int(ProtectedFileContent.storedSize(
                    plaintextSize: Int64(expected.count), header: content.header)))
                try FileManager.default.removeItem(atPath: path)
            }
        }
    }

    @Test("writing past the end zero-fills the gap", arguments: ContentKind.allCases)
    func writePastEnd(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        for (start, gapTo) in [(0, 10), (10, 4096), (100, 5000), (4096, 4096 * 3 + 7), (5000, 300_000), (4095, 4097)] {
            let file = try BackingFile(path: dir.file("gap-\(start)-\(gapTo)"))
            defer { withExtendedLifetime(file) {} }
            let content = try FormatFixture.makeContent(kind, file: file, accountKey: key)
            let head = [UInt8](repeating: 0xA5, count: start)
            try FormatFixture.write(content, head, at: 0)
            try FormatFixture.write(content, [1, 2, 3], at: Int64(gapTo))
            let expected = head + [UInt8](repeating: 0, count: gapTo - start) + [1, 2, 3]
            #expect(try FormatFixture.readAll(try FormatFixture.reopen(file, accountKey: key)) == expected, "\(start) -> \(gapTo)")
        }
    }

    @Test("truncate down inside a block and back up: zeros after, old bytes gone", arguments: ContentKind.allCases)
    func truncateDownUp(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        var rng = SplitMix64(seed: 3)
        let data = FormatFixture.randomBytes(5 * 4096 + 77, using: &rng)
        for cut in [0, 1, 100, 4095, 4096, 4097, 10000, 5 * 4096] {
            let path = dir.file("t-\(cut)")
            let file = try BackingFile(path: path)
            defer { withExtendedLifetime(file) {} }
            let content = try FormatFixture.makeContent(kind, file: file, accountKey: key)
            try FormatFixture.write(content, data, at: 0)
            try content.truncate(to: Int64(cut))
            #expect(try content.plaintextSize() == Int64(cut))
            #expect(try FormatFixture.readAll(content) == Array(data[0..<cut]))
            try content.truncate(to: Int64(data.count))
            let expected = Array(data[0..<cut]) + [UInt8](repeating: 0, count: data.count - cut)
            let reread = try FormatFixture.reopen(file, accountKey: key)
            #expect(try FormatFixture.readAll(reread) == expected, "cut \(cut)")
            #expect(try FormatFixture.readFile(path).count == Int(ProtectedFileContent.storedSize(
                plaintextSize: Int64(data.count), header: content.header)))
        }
    }

    @Test("an empty encrypted file is exactly its header and reads as empty")
    func emptyFile() throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("e"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: key)
        try content.writeHeaderIfMissing()
        let header = try #require(content.header)
        #expect(try FormatFixture.readFile(file.path) == header.encoded())
        let reread = try FormatFixture.reopen(file, accountKey: key)
        #expect(reread.header == header)
        #expect(try reread.plaintextSize() == 0)
        #expect(try FormatFixture.read(reread, at: 0, count: 10).isEmpty)
    }

    @Test("model-based: 2000 seeded random operations agree with an in-memory model", arguments: ContentKind.allCases)
    func modelBased(kind: ContentKind) throws {
        let dir = try TempDirectory()
        let key = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("model"))
        defer { withExtendedLifetime(file) {} }
        var content = try FormatFixture.makeContent(kind, file: file, accountKey: key)
        var model: [UInt8] = []
        var rng = SplitMix64(seed: 0x5EED_0000 + UInt64(ContentKind.allCases.firstIndex(of: kind) ?? 0))
        let interesting = [0, 1, 4095, 4096, 4097, 8192, 12288]

        func randomOffset(_ rng: inout SplitMix64) -> Int {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: return Int.random(in: 0...(model.count + 10_000), using: &rng)
            case 1: return interesting[Int.random(in: 0..<interesting.count, using: &rng)] + Int.random(in: -1...1, using: &rng) * Int.random(in: 0...1, using: &rng)
            case 2: return max(0, model.count + Int.random(in: -5000...5000, using: &rng))
            default: return (model.count / 4096) * 4096 + Int.random(in: -2...2, using: &rng)
            }
        }

        func randomLength(_ rng: inout SplitMix64) -> Int {
            switch Int.random(in: 0..<50, using: &rng) {
            case 0: return Int.random(in: 64 * 4096...(70 * 4096), using: &rng)   // crosses a write chunk
            case 1...10: return interesting[Int.random(in: 0..<interesting.count, using: &rng)]
            default: return Int.random(in: 0...9000, using: &rng)
            }
        }

        for step in 0..<2000 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<45:
                let offset = max(0, randomOffset(&rng))
                let bytes = FormatFixture.randomBytes(randomLength(&rng), using: &rng)
                try FormatFixture.write(content, bytes, at: Int64(offset))
                if !bytes.isEmpty {
                    if offset + bytes.count > model.count {
                        model += [UInt8](repeating: 0, count: offset + bytes.count - model.count)
                    }
                    model.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
                }
            case 45..<60:
                let newSize = max(0, Int.random(in: 0..<3, using: &rng) == 0 ? randomOffset(&rng) : Int.random(in: 0...(model.count + 9000), using: &rng))
                try content.truncate(to: Int64(newSize))
                if newSize < model.count {
                    model.removeSubrange(newSize...)
                } else {
                    model += [UInt8](repeating: 0, count: newSize - model.count)
                }
            case 60..<95:
                let offset = max(0, randomOffset(&rng))
                let length = randomLength(&rng)
                let got = try FormatFixture.read(content, at: Int64(offset), count: length)
                let lo = min(offset, model.count)
                let hi = min(offset + length, model.count)
                #expect(got == Array(model[lo..<hi]), "step \(step): read \(offset)+\(length) of \(model.count)")
                if got != Array(model[lo..<hi]) { return }
            default:
                content = try FormatFixture.reopen(file, accountKey: key)
            }
            let size = try content.plaintextSize()
            #expect(size == Int64(model.count), "step \(step): size")
            if size != Int64(model.count) { return }
            if step % 250 == 249 {
                #expect(try FormatFixture.readAll(content) == model, "step \(step): full content")
            }
        }
        let final = try FormatFixture.reopen(file, accountKey: key)
        #expect(try FormatFixture.readAll(final) == model)
        #expect(try FormatFixture.readFile(file.path).count == Int(ProtectedFileContent.storedSize(
            plaintextSize: Int64(model.count), header: content.header)))
    }

    @Test("rewrapping for another owner keeps the body readable and changes only the header")
    func rewrap() throws {
        let dir = try TempDirectory()
        let oldKey = try SymmetricKey.random()
        let newKey = try SymmetricKey.random()
        let file = try BackingFile(path: dir.file("r"))
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: oldKey)
        var rng = SplitMix64(seed: 9)
        let data = FormatFixture.randomBytes(9000, using: &rng)
        try FormatFixture.write(content, data, at: 0)
        let header = try #require(content.header)
        let newOwner = "8c7f3e1a-0000-4000-8000-000000000002"
        let rewrapped = try header.rewrapped(owner: newOwner, keyId: 7, oldAccountKey: oldKey, newAccountKey: newKey)
        #expect(rewrapped.length == header.length)
        try rewrapped.encoded().withUnsafeBytes { try FileIO.pwriteFully(file.fd, $0, at: 0) }
        let reread = try FormatFixture.reopen(file, accountKey: newKey)
        #expect(reread.header?.owner == newOwner)
        #expect(reread.header?.encryption?.keyId == 7)
        #expect(try FormatFixture.readAll(reread) == data)
        #expect(FormatFixture.isAuthenticationFailure { _ = try FormatFixture.reopen(file, accountKey: oldKey) })
    }

    @Test("an encrypted header's key id is stored little-endian, covered by the wrap and decoded back", arguments: [UInt32(1), 0x0403_0201, .max])
    func keyIdRoundTrips(keyId: UInt32) throws {
        let accountKey = try SymmetricKey.random()
        let owner = "ü-owner"
        let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: owner, keyId: keyId, accountKey: accountKey)
        let bytes = header.encoded()
        let at = 13 + owner.utf8.count
        #expect(Array(bytes[at..<at + 4]) == [UInt8(keyId & 0xff), UInt8(keyId >> 8 & 0xff), UInt8(keyId >> 16 & 0xff), UInt8(keyId >> 24)])
        #expect(Array(bytes[13..<at]) == Array(owner.utf8))
        #expect(bytes.count == header.length)
        let decoded = try #require(try bytes.withUnsafeBytes { try ProtectedFileHeader.decode($0) })
        #expect(decoded == header)
        #expect(try decoded.unwrapFileKey(accountKey: accountKey).copyBytes() == fileKey.copyBytes())
        // Another key id in the same place no longer authenticates: the id is in the wrap's AAD.
        var moved = bytes
        moved[at] ^= 0x80
        let other = try #require(try moved.withUnsafeBytes { try ProtectedFileHeader.decode($0) })
        #expect(throws: MAMError.self) { try other.unwrapFileKey(accountKey: accountKey) }
    }
}
