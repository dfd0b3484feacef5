import Foundation
import Glibc
import MAMProtection
import Testing

@Suite("The daemon's log leaves out the scrub list's values and escapes control characters")
struct DaemonLogScrubTests {
    /// Flips one byte of the first block's ciphertext of the backing file `name`, so a read of
    /// it fails authentication and the daemon logs the backing path.
    static func tamper(_ m: MountedFixture, _ name: String) throws {
        let header = try #require(try m.backingHeader(name))
        let fd = open(m.backing + "/" + name, O_RDWR)
        defer { close(fd) }
        var byte: UInt8 = 0
        let offset = off_t(header.length + 100)
        #expect(pread(fd, &byte, 1, offset) == 1)
        byte ^= 0x01
        #expect(pwrite(fd, &byte, 1, offset) == 1)
    }

    @Test("A value added to the scrub list while mounted is replaced by [scrubbed] in every later log line")
    func scrubbedWhileMounted() throws {
        try withMount(.managed) { m in
            guard m.logsToFile else { return }
            #expect(try m.sh("head -c 8192 /dev/urandom > f && head -c 8192 /dev/urandom > g && sync").status == 0)
            try Self.tamper(m, "f")
            try Self.tamper(m, "g")
            let before = try m.sh("echo 3 > /proc/sys/vm/drop_caches; cat f > /dev/null 2>&1; echo $?")
            #expect(before.out == "1\n", "\(before.err)")
            let logBefore = try String(contentsOfFile: m.log, encoding: .utf8)
            #expect(logBefore.contains(m.backing + "/f:"), "log: \(logBefore)")
            let lengthBefore = logBefore.utf8.count

            #expect(try m.mamfs(["scrub", m.backing]).status == 0)
            // The mount reads the state again at most every 200 ms.
            usleep(300_000)
            let after = try m.sh("echo 3 > /proc/sys/vm/drop_caches; cat g > /dev/null 2>&1; echo $?")
            #expect(after.out == "1\n", "\(after.err)")
            let logAfter = try String(contentsOfFile: m.log, encoding: .utf8)
            let newLines = String(decoding: Array(logAfter.utf8).dropFirst(lengthBefore), as: UTF8.self)
            #expect(newLines.contains(Scrubber.placeholder + "/g:"), "new log lines: \(newLines)")
            #expect(!newLines.contains(m.backing), "new log lines: \(newLines)")
        }
    }

    /// A backing file's name went into the log raw: a newline in it forged a log line, an
    /// escape sequence drove the terminal of a daemon run with -f.
    @Test("A file name with a newline and an escape sequence is logged escaped, on one line")
    func controlCharactersEscaped() throws {
        try withMount(.managed) { m in
            guard m.logsToFile else { return }
            let name = "n\nmamfs: forged\u{1b}[2J"
            #expect(try m.sh("head -c 8192 /dev/urandom > \"$(printf 'n\\nmamfs: forged\\033[2J')\" && sync").status == 0)
            try Self.tamper(m, name)
            let read = try m.sh("echo 3 > /proc/sys/vm/drop_caches; cat n* > /dev/null 2>&1; echo $?")
            #expect(read.out == "1\n", "\(read.err)")
            let log = try String(contentsOfFile: m.log, encoding: .utf8)
            #expect(log.contains(m.backing + "/n\\nmamfs: forged\\x1b[2J: "), "log: \(log)")
            #expect(!log.contains("\nmamfs: forged"), "log: \(log)")
            #expect(!log.unicodeScalars.contains { $0.value == 0x1b }, "log: \(log)")
        }
    }
}
