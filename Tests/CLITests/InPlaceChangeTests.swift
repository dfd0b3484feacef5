import Foundation
import Glibc
import MAMTestSupport
import Testing

/// An in-place rewrite (`encrypt`, `decrypt`, `protect`) of a file another process writes to
/// meanwhile: the command either includes the write or fails with EAGAIN (74) leaving the
/// file as the writer left it; it never exits 0 with the write lost. (A write by name after
/// the command has finished lands on the new file, as it would after any rewrite.)
@Suite("CLI: a file written to during an in-place rewrite")
struct InPlaceChangeTests {
    static let marker = Data("APPENDED-WHILE-REWRITTEN\n".utf8)

    /// Runs `mamfs ARGUMENTS` while another thread appends `marker` to `file` after `delay`
    /// seconds; returns the command's result.
    static func runWhileAppending(_ sandbox: Sandbox, _ arguments: [String], file: String, delay: TimeInterval) throws -> ProcessResult {
        let appender = Thread {
            Thread.sleep(forTimeInterval: delay)
            let fd = open(file, O_WRONLY | O_APPEND)
            guard fd >= 0 else { return }
            _ = marker.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        appender.start()
        let result = try sandbox.run(arguments)
        while !appender.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        return result
    }

    @Test("encrypt in place of a 96 MiB file appended to while it runs: 0 with the append kept, or 74 with the file as written",
          arguments: [0.02, 0.1, 0.3, 0.6])
    func encryptKeepsOrRefuses(delay: TimeInterval) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let chunk = Fixtures.binary(1 << 20)
        var original = Data(capacity: 96 * chunk.count)
        for _ in 0..<96 { original.append(chunk) }
        let file = try sandbox.write("big.bin", original)
        let result = try Self.runWhileAppending(sandbox, ["encrypt", file, "--account", Fixtures.account], file: file, delay: delay)
        let expected = original + Self.marker
        if result.status == 0 {
            let plain = try sandbox.run(["decrypt", file, "-o", "-"])
            if plain.status == 0 {
                let kept = plain.stdout == expected
                #expect(kept, "encrypt exited 0 but the append was lost (\(plain.stdout.count) of \(expected.count) bytes)")
            } else {
                // The append came after the command had finished, onto the encrypted file by
                // its name: without those bytes the file is the whole original, encrypted.
                let stored = try sandbox.read(file)
                #expect(stored.suffix(Self.marker.count) == Self.marker, "decrypt failed: \(plain.err)")
                let copy = try sandbox.write("before-append.bin", stored.prefix(stored.count - Self.marker.count))
                let before = try sandbox.run(["decrypt", copy, "-o", "-"])
                let whole = before.status == 0 && before.stdout == original
                #expect(whole, "\(before.status) \(before.err)")
            }
        } else {
            #expect(result.status == 74, "\(result.status) \(result.err)")
            #expect(result.err.contains("was written to while it was rewritten"), "\(result.err)")
            let unchanged = try sandbox.read(file) == expected
            #expect(unchanged, "the refused rewrite changed the file")
        }
    }
}
