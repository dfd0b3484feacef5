import Foundation
import Testing
import MAMTestSupport

/// Lines a client can cause at will reach the daemon's log once a minute per file, not once
/// per request.
@Suite("The daemon's log holds back repeats a client causes")
struct DaemonLogRateTests {
    private func lines(_ m: MountedFixture, containing text: String) -> Int {
        let log = (try? String(contentsOfFile: m.log, encoding: .utf8)) ?? ""
        return log.split(separator: "\n").filter { $0.contains(text) }.count
    }

    @Test("200 reads of a tampered file log its path once; another tampered file still gets its own line")
    func tamperedReads() throws {
        try withMount(.managed) { m in
            guard m.logsToFile else { return }
            #expect(try m.sh("head -c 8192 /dev/urandom > f && head -c 8192 /dev/urandom > g && sync").status == 0)
            try DaemonLogScrubTests.tamper(m, "f")
            try DaemonLogScrubTests.tamper(m, "g")
            let r = try m.sh("""
            fails=0; for i in $(seq 200); do cat f > /dev/null 2>&1 || fails=$((fails+1)); done; \
            cat g > /dev/null 2>&1; echo $fails $?
            """)
            #expect(r.out == "200 1\n", "\(r.err)")
            #expect(lines(m, containing: m.backing + "/f:") == 1)
            #expect(lines(m, containing: m.backing + "/g:") == 1)
        }
    }

    @Test("200 refused writes of the magic to an untagged file log one line", arguments: MountedFixture.Kind.allCases)
    func refusedWrites(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            guard m.logsToFile else { return }
            let r = try m.sh("""
            printf 'plain text, long enough\\n' > "$B/u" && python3 -c '
            import errno, os
            fd = os.open("u", os.O_RDWR)
            refused = 0
            for i in range(200):
                try:
                    os.pwrite(fd, b"\\x89MAMFS\\r\\n", 0)
                except OSError as e:
                    refused += e.errno == errno.EPERM
            print(refused)
            ' && cat "$B/u"
            """)
            #expect(r.out == "200\nplain text, long enough\n", "\(r.err)")
            #expect(lines(m, containing: "refused a write that would make an untagged file start with the mamfs magic") == 1)
        }
    }
}
