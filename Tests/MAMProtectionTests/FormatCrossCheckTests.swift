import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

/// Files written by the Swift code must be read by the independent Python decoder
/// (Tools/verify_format.py, written from docs/FORMAT.md) to exactly the expected bytes.
@Suite("Format cross-check with the Python decoder")
struct FormatCrossCheckTests {
    struct Run {
        let status: Int32
        let stdout: Data
        let stderr: String
    }

    static func python(_ arguments: [String]) throws -> Run {
        let tool = FormatFixture.repoRoot.appendingPathComponent("Tools/verify_format.py").path
        let result = try runProcess("/usr/bin/env", ["python3", tool] + arguments, environment: ProcessInfo.processInfo.environment)
        return Run(status: result.status, stdout: result.stdout, stderr: result.err)
    }

    static func hexKey(_ key: SymmetricKey) -> String {
        key.withUnsafeBytes { FormatFixture.hex(Array($0)) }
    }

    @Test("python recomputes every vector in Tools/format-vectors.json")
    func pythonVectors() throws {
        let run = try Self.python(["vectors", FormatFixture.repoRoot.appendingPathComponent("Tools/format-vectors.json").path])
        #expect(run.status == 0, "\(run.stderr)")
    }

    @Test("python rejects a vector file with one wrong byte")
    func pythonVectorsCanFail() throws {
        let dir = try TempDirectory()
        let source = FormatFixture.repoRoot.appendingPathComponent("Tools/format-vectors.json")
        var text = try String(contentsOf: source, encoding: .utf8)
        // The vector header starts with the magic; change the version byte 01 -> 02.
        text = text.replacingOccurrences(of: "\"894d414d46530d0a0101", with: "\"894d414d46530d0a0201")
        let path = dir.file("bad.json")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let run = try Self.python(["vectors", path])
        #expect(run.status == 1)
        #expect(run.stderr.contains("MISMATCH"))
    }

    @Test("Swift-written files decrypt in python to exactly the expected bytes",
          arguments: [0, 1, 4095, 4096, 4097, 3 * 1024 * 1024 + 17])
    func pythonDecrypts(size: Int) throws {
        let dir = try TempDirectory()
        let accountKey = try SymmetricKey.random()
        var rng = SplitMix64(seed: UInt64(size) &+ 77)
        let owner = "8c7f3e1a-0000-4000-8000-\(String(format: "%012x", size))"
        let path = dir.file("swift-written")
        let file = try BackingFile(path: path)
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: accountKey, owner: owner)
        try content.writeHeaderIfMissing()
        var expected = FormatFixture.randomBytes(size, using: &rng)

        // Odd-sized pieces covering [0, size), written in random order.
        var pieces: [Range<Int>] = []
        var at = 0
        while at < size {
            let length = min(size - at, Int.random(in: 0...70_000, using: &rng) | 1)
            pieces.append(at..<(at + length))
            at += length
        }
        pieces.shuffle(using: &rng)
        for piece in pieces {
            try FormatFixture.write(content, Array(expected[piece]), at: Int64(piece.lowerBound))
        }
        // Truncate down to inside a block, then back up: the tail reads as zeros.
        if size > 0 {
            let cut = size / 2 + (size > 10 ? 3 : 0)
            try content.truncate(to: Int64(cut))
            try content.truncate(to: Int64(size))
            expected.replaceSubrange(cut..<size, with: repeatElement(0, count: size - cut))
        }
        #expect(try FormatFixture.readAll(content) == expected)

        let out = dir.file("plain.out")
        let run = try Self.python(["decrypt", path, "--account-key", Self.hexKey(accountKey), "-o", out])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try FormatFixture.readFile(out) == expected)

        let info = try Self.python(["info", path])
        #expect(info.status == 0, "\(info.stderr)")
        let json = try JSONSerialization.jsonObject(with: info.stdout) as? [String: Any]
        #expect(json?["owner"] as? String == owner)
        #expect(json?["encrypted"] as? Bool == true)
        #expect((json?["plaintext_size"] as? NSNumber)?.intValue == size)
        #expect((json?["header_length"] as? NSNumber)?.intValue == content.header?.length)
        #expect((json?["stored_size"] as? NSNumber)?.int64Value == ProtectedFileContent.storedSize(
            plaintextSize: Int64(size), header: content.header))
    }

    @Test("plain-tagged and untagged Swift files read the same in python", arguments: [ContentKind.plainTagged, .untagged])
    func pythonReadsPlain(kind: ContentKind) throws {
        let dir = try TempDirectory()
        var rng = SplitMix64(seed: 5)
        let path = dir.file("plain")
        let file = try BackingFile(path: path)
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(kind, file: file, accountKey: try SymmetricKey.random())
        let data = FormatFixture.randomBytes(10_000, using: &rng)
        try FormatFixture.write(content, data, at: 0)
        try content.truncate(to: 6000)
        try content.truncate(to: 7000)
        let expected = Array(data[0..<6000]) + [UInt8](repeating: 0, count: 1000)
        let run = try Self.python(["decrypt", path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect([UInt8](run.stdout) == expected)
        let info = try Self.python(["info", path])
        let json = try JSONSerialization.jsonObject(with: info.stdout) as? [String: Any]
        #expect(json?["tagged"] as? Bool == (kind == .plainTagged))
        #expect((json?["plaintext_size"] as? NSNumber)?.intValue == 7000)
    }

    @Test("python exits 65 with one line and no output for a tampered Swift file")
    func pythonRejectsTampered() throws {
        let dir = try TempDirectory()
        let accountKey = try SymmetricKey.random()
        var rng = SplitMix64(seed: 6)
        let path = dir.file("t")
        let file = try BackingFile(path: path)
        defer { withExtendedLifetime(file) {} }
        let content = try FormatFixture.makeContent(.encrypted, file: file, accountKey: accountKey)
        try FormatFixture.write(content, FormatFixture.randomBytes(9000, using: &rng), at: 0)
        var bytes = try FormatFixture.readFile(path)
        let stored = bytes
        for position in [9, 60, 120, (content.header?.length ?? 0) + 4200, bytes.count - 1] {
            bytes = stored
            bytes[position] ^= 0x01
            let tampered = dir.file("t-\(position)")
            try FormatFixture.writeFile(tampered, bytes)
            let out = dir.file("out-\(position)")
            let run = try Self.python(["decrypt", tampered, "--account-key", Self.hexKey(accountKey), "-o", out])
            #expect(run.status == 65, "byte \(position): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1)
            #expect(!FileManager.default.fileExists(atPath: out))
        }
        let cut = dir.file("cut")
        try FormatFixture.writeFile(cut, Array(stored.dropLast(5)))
        #expect(try Self.python(["decrypt", cut, "--account-key", Self.hexKey(accountKey)]).status == 65)
        let wrongKey = try Self.python(["decrypt", path, "--account-key", Self.hexKey(try SymmetricKey.random())])
        #expect(wrongKey.status == 65)
        #expect(wrongKey.stdout.isEmpty)
    }
}
