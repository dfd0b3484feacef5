import Foundation
import Testing
import MAMTestSupport
@testable import MAMProtection

/// A clock the test moves by hand.
private final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date(timeIntervalSince1970: 1_800_000_000.25)

    var now: Date {
        lock.lock(); defer { lock.unlock() }
        return current
    }

    func advance(_ seconds: TimeInterval) {
        lock.lock(); defer { lock.unlock() }
        current += seconds
    }
}

private let work = "8c7f3e1a-0000-4000-8000-000000000001"

private func denial(_ path: String, executable: String = "/usr/bin/cat", action: String = "open-read",
                    rule: String = "sendData=managedApps", pid: Int32 = 4242) -> AuditEvent {
    AuditEvent(uid: 1000, pid: pid, executable: executable, action: action, path: path, owner: work,
               decision: "denied", rule: rule)
}

/// The log's lines as text.
private func lines(_ log: AuditLog) throws -> [String] {
    try String(decoding: Data(contentsOf: log.url), as: UTF8.self).split(separator: "\n").map(String.init)
}

private func writeLines(_ lines: [String], to log: AuditLog) throws {
    try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: log.url)
}

/// A state with a log holding five records of different actions (never coalesced).
private func fiveRecords() throws -> (StateFixture, AuditLog) {
    let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
    let log = fixture.context.auditLog
    for index in 1...5 { log.record(denial("/work/file\(index)", action: "action-\(index)")) }
    log.flush()
    return (fixture, log)
}

/// The seq and reason `verify()` reports, nil when the log verifies.
private func breakage(_ log: AuditLog) throws -> (seq: Int64, reason: String)? {
    guard case .broken(let seq, let reason) = try log.verify() else { return nil }
    return (seq, reason)
}

/// What `verify()` reports after `change` edited the lines of a log of five records (given
/// as parsed records too).
private func breakage(afterChanging change: (inout [String], [AuditRecord]) throws -> Void) throws -> (seq: Int64, reason: String)? {
    let (fixture, log) = try fiveRecords()
    defer { withExtendedLifetime(fixture) {} }
    var text = try lines(log)
    try change(&text, try log.records())
    try writeLines(text, to: log)
    return try breakage(log)
}

@Suite("Audit log")
struct AuditLogTests {
    @Test("records are chained JSON lines: the first after 64 zeros, each after the one before")
    func chainVerifies() throws {
        let (fixture, log) = try fiveRecords()
        let text = try lines(log)
        #expect(text.count == 5)
        let records = try log.records()
        #expect(records.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(records.map(\.path) == (1...5).map { "/work/file\($0)" })
        #expect(records.allSatisfy { $0.count == 1 && $0.uid == 1000 && $0.pid == 4242 && $0.decision == "denied" })
        let first = records[0]
        var unhashed = first
        unhashed.hash = ""
        let expected = try SHA256.hex(of: Array(String(repeating: "0", count: 64).utf8),
                                      Array(text[0].replacingOccurrences(of: ",\"hash\":\"\(first.hash)\"", with: "").utf8))
        #expect(first.hash == expected)
        #expect(records[1].hash == (try SHA256.hex(of: Array(first.hash.utf8), records[1].canonicalJSON(includingHash: false))))
        #expect(text[0].hasPrefix("{\"action\":\"action-1\",\"count\":1,\"decision\":\"denied\",\"executable\":\"/usr/bin/cat\",\"hash\":\""))
        #expect(first.time.count == 24 && first.time.hasSuffix("Z") && first.date != nil)
        #expect(try log.verify() == .verified(records: 5))
        #expect(try fixture.context.state.auditTail() == AuditTail(seq: 5, hash: records[4].hash))
    }

    @Test("the chain is what the documented canonical form gives (checked by Python's json and hashlib)")
    func pythonRecomputesTheChain() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let log = fixture.context.auditLog
        log.record(denial("/work/plain"))
        log.record(denial("/work/\"quoted\"\\back\nline\ttab\u{01}ctl/é漢字", action: "save"))
        log.record(AuditEvent(uid: 0, pid: 1, executable: "/usr/bin/soffice", action: "declassify", path: "/w/r.odt",
                              owner: "", decision: "audited", rule: "allowUserDecrypt=false"))
        log.flush()
        let script = """
        import hashlib, json, sys
        previous = "0" * 64
        for number, line in enumerate(open(sys.argv[1], "rb").read().decode("utf-8").splitlines(), 1):
            record = json.loads(line)
            assert record["seq"] == number, number
            digest = record.pop("hash")
            canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            assert hashlib.sha256((previous + canonical).encode("utf-8")).hexdigest() == digest, number
            record["hash"] = digest
            assert json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) == line, number
            previous = digest
        print(number, previous)
        """
        let result = try runProcess("/usr/bin/python3", ["-c", script, log.url.path], environment: ProcessInfo.processInfo.environment)
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out == "3 \(try log.records()[2].hash)\n")
        #expect(try log.records()[1].path == "/work/\"quoted\"\\back\nline\ttab\u{01}ctl/é漢字")
    }

    @Test("an edited record is found by its seq")
    func editedRecord() throws {
        let found = try #require(try breakage(afterChanging: { lines, _ in
            lines[2] = lines[2].replacingOccurrences(of: "/work/file3", with: "/work/fileX")
        }), "not detected")
        #expect(found.seq == 3)
        #expect(found.reason.contains("edited"))
    }

    @Test("a record whose whitespace was changed counts as edited")
    func reformattedRecord() throws {
        let found = try breakage(afterChanging: { lines, _ in
            lines[1] = lines[1].replacingOccurrences(of: ",\"count\":", with: ", \"count\":")
        })
        #expect(found?.seq == 2)
        #expect(found?.reason == "record 2 was edited (its hash does not match)")
    }

    @Test("an edited last record with every hash recomputed differs from the state")
    func editedAndRehashed() throws {
        let found = try #require(try breakage(afterChanging: { lines, records in
            var last = records[4]
            last.path = "/elsewhere"
            last.hash = try last.chainHash(after: records[3].hash)
            lines[4] = String(decoding: last.canonicalJSON(includingHash: true), as: UTF8.self)
        }), "not detected")
        #expect(found.seq == 5)
        #expect(found.reason.contains("state"))
    }

    @Test("a removed record is found by the missing seq")
    func removedRecord() throws {
        let found = try #require(try breakage(afterChanging: { lines, _ in lines.remove(at: 2) }), "not detected")
        #expect(found.seq == 3)
        #expect(found.reason.contains("missing"))
    }

    @Test("reordered records are found at the first place out of order")
    func reorderedRecords() throws {
        #expect(try breakage(afterChanging: { lines, _ in lines.swapAt(1, 3) })?.seq == 2)
    }

    @Test("records removed from the end are found through the state's tail")
    func truncatedTail() throws {
        let (fixture, log) = try fiveRecords()
        defer { withExtendedLifetime(fixture) {} }
        try writeLines(Array(try lines(log).prefix(3)), to: log)
        #expect(try log.verify() == .broken(seq: 4, reason: "records 4 to 5 are missing from the end (the state records 5)"))
        try writeLines(Array(try lines(log).prefix(1)) , to: log)
        #expect(try breakage(log)?.seq == 2)
    }

    @Test("a cut inside the last line, or of its newline only, is found")
    func cutLastLine() throws {
        let (fixture, log) = try fiveRecords()
        defer { withExtendedLifetime(fixture) {} }
        let bytes = try Data(contentsOf: log.url)
        try bytes.prefix(bytes.count - 20).write(to: log.url)
        let found = try #require(try breakage(log), "not detected")
        #expect(found.seq == 5)
        #expect(found.reason.contains("cut"))
        try bytes.prefix(bytes.count - 1).write(to: log.url)
        #expect(try log.verify() == .broken(seq: 5, reason: "record 5 is cut off (its line has no end)"))
    }

    @Test("a removed log is found when the state recorded records")
    func deletedFile() throws {
        let (fixture, log) = try fiveRecords()
        defer { withExtendedLifetime(fixture) {} }
        try FileManager.default.removeItem(at: log.url)
        let found = try #require(try breakage(log), "not detected")
        #expect(found.seq == 1)
        #expect(found.reason.contains("missing") && found.reason.contains("5"))
        #expect(try log.records() == [])
    }

    @Test("a state without a log verifies with 0 records")
    func emptyLog() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        #expect(try fixture.context.auditLog.verify() == .verified(records: 0))
        #expect(try fixture.context.auditLog.records() == [])
    }

    @Test("10,000 identical denials in a burst become a few records whose counts sum to 10,000")
    func burstCoalesced() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let log = fixture.context.auditLog
        for index in 0..<10_000 { log.record(denial("/work/index/\(index)", pid: Int32(100 + index % 7))) }
        log.flush()
        let records = try log.records()
        #expect(records.count >= 2 && records.count <= 20, "\(records.count) records")
        #expect(records.reduce(0) { $0 + $1.count } == 10_000)
        #expect(records[0].path == "/work/index/0" && records[0].count == 1)
        #expect(records[1].path == "/work/index/1")
        #expect(try log.verify() == .verified(records: Int64(records.count)))
    }

    @Test("events that differ in executable, action, owner, decision or rule are not coalesced")
    func differentEventsNotCoalesced() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let log = fixture.context.auditLog
        let base = denial("/w/a")
        var variants = [base]
        variants.append(denial("/w/a", executable: "/usr/bin/less"))
        variants.append(denial("/w/a", action: "open-write"))
        variants.append(denial("/w/a", rule: "receiveData"))
        var other = base; other.owner = ""; variants.append(other)
        var audited = base; audited.decision = "audited"; variants.append(audited)
        var root = base; root.uid = 0; variants.append(root)
        for event in variants { log.record(event) }
        log.flush()
        #expect(try log.records().count == variants.count)
    }

    @Test("counted events are written by a record that arrives after the window, with the first counted path")
    func pendingWrittenAfterWindow() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let clock = ManualClock()
        let log = AuditLog(stateDirectory: fixture.stateDirectory, state: fixture.context.state,
                           burstWindow: 2, clock: { clock.now })
        log.record(denial("/w/1"))
        clock.advance(0.5)
        log.record(denial("/w/2"))
        clock.advance(1)
        log.record(denial("/w/3"))
        #expect(try log.records().map(\.count) == [1], "counted events wait for the window")
        clock.advance(1)
        log.record(denial("/w/other", action: "create", rule: "workDirectory"))
        let records = try log.records()
        #expect(records.map(\.count) == [1, 2, 1])
        #expect(records.map(\.path) == ["/w/1", "/w/2", "/w/other"])
        #expect(AuditTime.parse(records[1].time) == Date(timeIntervalSince1970: 1_800_000_000.75))
        // The burst closed: the next identical event opens a new one and is written at once.
        log.record(denial("/w/4"))
        #expect(try log.records().map(\.path).last == "/w/4")
        #expect(try log.verify() == .verified(records: 4))
    }

    @Test("a timer writes counted events when no further event arrives")
    func timerWritesPending() throws {
        // The window is decided by the log's clock, held still while the events are recorded
        // (a loaded machine may take longer than the window between two calls), and moved past
        // the window only after the timer has fired at least once with it still open.
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let clock = ManualClock()
        let log = AuditLog(stateDirectory: fixture.stateDirectory, state: fixture.context.state,
                           burstWindow: 0.2, clock: { clock.now })
        log.record(denial("/w/1"))
        log.record(denial("/w/2"))
        log.record(denial("/w/3"))
        usleep(500_000)
        #expect(try log.records().map(\.count) == [1], "the window is still open by the log's clock")
        clock.advance(0.2)
        var counts: [Int64] = []
        for _ in 0..<100 {
            counts = try log.records().map(\.count)
            if counts == [1, 2] { break }
            usleep(50_000)
        }
        #expect(counts == [1, 2])
    }

    @Test("separate logs on one state appending from several threads keep one valid chain")
    func concurrentAppends() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let writers = 4
        let perWriter = 150
        let failures = NSLock()
        nonisolated(unsafe) var errors: [String] = []
        let directory = fixture.stateDirectory
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            do {
                let store = try StateStore.open(directory: directory, create: false)
                let log = AuditLog(stateDirectory: directory, state: store)
                for index in 0..<perWriter {
                    log.record(denial("/w/\(writer)/\(index)", action: "action-\(writer)-\(index)", pid: Int32(writer)))
                }
                log.flush()
                store.close()
            } catch {
                failures.lock(); errors.append("\(error)"); failures.unlock()
            }
        }
        #expect(errors.isEmpty)
        let log = fixture.context.auditLog
        let records = try log.records()
        #expect(records.count == writers * perWriter)
        #expect(records.map(\.seq) == (1...Int64(writers * perWriter)).map { $0 })
        #expect(Set(records.map(\.path)).count == writers * perWriter)
        #expect(try log.verify() == .verified(records: Int64(writers * perWriter)))
    }

    @Test("the log is created 0600, and a log made wider is set back to 0600")
    func fileMode() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let log = fixture.context.auditLog
        let old = umask(0)
        log.record(denial("/w/1"))
        umask(old)
        var st = stat()
        #expect(stat(log.url.path, &st) == 0)
        #expect(st.st_mode & 0o7777 == 0o600)
        chmod(log.url.path, 0o644)
        log.record(denial("/w/2", action: "other"))
        #expect(stat(log.url.path, &st) == 0)
        #expect(st.st_mode & 0o7777 == 0o600)
    }

    @Test("a record the state missed (a stop between fsync and state update) is continued after")
    func continuesAfterUnrecordedRecord() throws {
        let (fixture, log) = try fiveRecords()
        let records = try log.records()
        try fixture.context.state.setAuditTail(AuditTail(seq: 4, hash: records[3].hash))
        log.record(denial("/w/6", action: "after"))
        #expect(try log.records().map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(try log.verify() == .verified(records: 6))
    }

    /// The state's tail could not be written for several appends (a read-only state.db while
    /// the log stayed writable): the next append took up only one missed record, wrote a seq
    /// already there and broke the chain.
    @Test("several records the state missed (its tail could not be written) are continued after; a gap or a wrong hash among them is not")
    func continuesAfterSeveralUnrecordedRecords() throws {
        let (fixture, log) = try fiveRecords()
        let records = try log.records()
        try fixture.context.state.setAuditTail(AuditTail(seq: 2, hash: records[1].hash))
        try log.recordNow([denial("/w/6", action: "after")])
        #expect(try log.records().map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(try log.verify() == .verified(records: 6))

        // A tail that the records after it do not chain from is not moved: verify names the break.
        try fixture.context.state.setAuditTail(AuditTail(seq: 3, hash: records[1].hash))
        try log.recordNow([denial("/w/7", action: "later")])
        #expect(try log.records().map(\.seq) == [1, 2, 3, 4, 5, 6, 4])
        #expect(try log.verify() != .verified(records: 7))
    }

    /// A record that did not fit (a full disk) stayed in the log as a torn line: every later
    /// append followed it, and `verify` and `records` failed for good.
    @Test("an append that fails on a full disk leaves the log as it was; once there is room again the chain goes on",
          .enabled(if: getuid() == 0))
    func fullDiskLeavesNoTornRecord() throws {
        let directory = try TempDirectory(prefix: "mamfs-audit-full")
        let mounted = try runProcess("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", directory.path],
                                     environment: testEnvironment())
        try #require(mounted.status == 0, "mount tmpfs: \(mounted.err)")
        defer { _ = try? runProcess("/usr/bin/umount", ["-l", directory.path], environment: testEnvironment()) }
        let stateDirectory = StateDirectory(path: directory.path + "/state")
        let state = try StateStore(directory: stateDirectory, create: true)
        let log = AuditLog(stateDirectory: stateDirectory, state: state)
        var count = 0
        // Grow the log to just under a page, so the next record needs a page the disk lacks.
        while (try? FileManager.default.attributesOfItem(atPath: log.url.path)[.size] as? Int) ?? 0 < 4096 - 400 {
            count += 1
            try log.recordNow([denial("/w/\(count)", action: "fill-\(count)")])
        }
        let before = try Data(contentsOf: log.url)
        let filler = directory.path + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        let chunk = [UInt8](repeating: 0, count: 65536)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        close(fd)
        #expect(throws: MAMError.self) {
            try log.recordNow([denial("/w/" + String(repeating: "x", count: 600), action: "too-big")])
        }
        let after = try Data(contentsOf: log.url)
        let cutBack = after == before
        #expect(cutBack, "the failed append is cut back (\(before.count) bytes before, \(after.count) after)")
        try FileManager.default.removeItem(atPath: filler)
        try log.recordNow([denial("/w/room-again", action: "room")])
        #expect(try log.verify() == .verified(records: Int64(count + 1)))
        #expect(try log.records().last?.path == "/w/room-again")
    }

    @Test("an append whose tail the state cannot store is cut back: the command fails and leaves no record, and the log still verifies")
    func unstoredTailLeavesNoRecord() throws {
        let (fixture, log) = try fiveRecords()
        let before = try Data(contentsOf: log.url)
        // The state refuses every write of the tail (as a read-only or full state would).
        try fixture.context.state.database.execute("""
            CREATE TRIGGER refuse_tail_update BEFORE UPDATE ON audit_tail BEGIN SELECT RAISE(ABORT, 'refused'); END;
            CREATE TRIGGER refuse_tail_insert BEFORE INSERT ON audit_tail BEGIN SELECT RAISE(ABORT, 'refused'); END;
            """)
        #expect(throws: MAMError.self) { try log.recordNow([denial("/w/declassified", action: "decrypt")]) }
        let after = try Data(contentsOf: log.url)
        #expect(after == before, "the record of the failed append is cut back (\(before.count) bytes before, \(after.count) after)")
        #expect(try log.verify() == .verified(records: 5))
        try fixture.context.state.database.execute("DROP TRIGGER refuse_tail_update; DROP TRIGGER refuse_tail_insert;")
        try log.recordNow([denial("/w/later", action: "later")])
        #expect(try log.verify() == .verified(records: 6))
        #expect(try log.records().map(\.path).suffix(1) == ["/w/later"])
    }

    @Test("recordNow writes at once, identical events as one counted record, and throws when the log cannot be written")
    func recordNowWritesOrThrows() throws {
        let (fixture, log) = try fiveRecords()
        try log.recordNow([denial("/w/a", action: "now"), denial("/w/b", action: "now"), denial("/w/c", action: "other")])
        let records = try log.records()
        #expect(records.map(\.seq) == [1, 2, 3, 4, 5, 6, 7])
        #expect(records.suffix(2).map(\.path) == ["/w/a", "/w/c"])
        #expect(records.suffix(2).map(\.count) == [2, 1])
        try FileManager.default.removeItem(atPath: log.url.path)
        try FileManager.default.createDirectory(atPath: log.url.path, withIntermediateDirectories: false)
        #expect(throws: MAMError.self) { try log.recordNow([denial("/w/d", action: "lost")]) }
        _ = fixture
    }

    @Test("records(since:account:) filter by time and owner")
    func recordsFilter() throws {
        let fixture = try StateFixture(enroll: nil, prefix: "mamfs-audit")
        let clock = ManualClock()
        let log = AuditLog(stateDirectory: fixture.stateDirectory, state: fixture.context.state,
                           burstWindow: 2, clock: { clock.now })
        log.record(denial("/w/early"))
        clock.advance(3600)
        let cut = clock.now
        var personal = denial("/p/late", action: "save")
        personal.owner = ""
        log.record(personal)
        log.record(denial("/w/late", action: "create"))
        #expect(try log.records(since: cut).map(\.path) == ["/p/late", "/w/late"])
        #expect(try log.records(account: work.uppercased()).map(\.path) == ["/w/early", "/w/late"])
        #expect(try log.records(since: cut, account: work).map(\.path) == ["/w/late"])
        #expect(try log.records(since: cut + 1).isEmpty)
    }

    @Test("timestamps are ISO 8601 UTC with milliseconds and parse back")
    func timeFormat() {
        let date = Date(timeIntervalSince1970: 1_796_136_937.123_9)
        #expect(AuditTime.format(date) == "2026-12-01T14:55:37.123Z")
        let parsed = AuditTime.parse("2026-12-01T14:55:37.123Z")?.timeIntervalSince1970 ?? 0
        #expect(abs(parsed - 1_796_136_937.123) < 0.000_01)
        #expect(AuditTime.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(AuditTime.parse("2026-12-01 14:55:37.123Z") == nil)
    }
}
