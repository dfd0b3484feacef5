import Foundation
import MAMSystem

/// The tamper-evident audit log of a state directory: `audit.log`, JSON Lines, mode 0600,
/// one `AuditRecord` per line, each chained to the one before by its hash; the last record's
/// seq and hash are also kept in `state.db` (`StateStore.auditTail`), so removing records at
/// the end, or the whole file, is noticed too.
///
/// Any number of processes (the CLI, mount daemons) and `AuditLog` objects may append at once:
/// each append takes `flock(LOCK_EX)` on the log, reads the tail from `state.db`, appends,
/// fsyncs, updates `state.db` and unlocks.
///
/// Bursts: an event is written at once unless an identical one (same uid, executable, action,
/// owner, decision and rule; the pid and path may differ) was written less than
/// `burstWindow` (2 s) before; those are counted, and one record with the first counted path
/// and the `count` is written when the window closes: by `flush()`, by a timer, or by the next
/// `record` after it. An indexer hitting 10,000 files thus writes a few lines.
///
/// Mirrors the audit logs of endpoint DLP / Windows Information Protection; the chain is the
/// idea of a hash-chained (forward-integrity) log such as systemd-journald's sealed journals.
public final class AuditLog: @unchecked Sendable {
    /// The file name inside the state directory.
    public static let fileName = "audit.log"
    /// How long identical events are counted into one record, in seconds.
    public static let defaultBurstWindow: TimeInterval = 2

    /// `STATE/audit.log`.
    public let url: URL
    private let state: StateStore
    private let burstWindow: TimeInterval
    private let clock: @Sendable () -> Date
    private let lock = NSLock()
    /// Bursts whose window is open: the events counted since the first was written.
    private var bursts: [AuditEvent.BurstKey: Burst] = [:]
    private var timerScheduled = false
    private var reportedFailure = false

    private struct Burst {
        /// When the event that opened the window was written.
        let opened: Date
        /// The first event counted (not yet written) and when it happened.
        var first: (event: AuditEvent, date: Date)?
        var count: Int64 = 0
    }

    /// The log of `stateDirectory`, appending through `state` (the directory's `state.db`).
    public convenience init(stateDirectory: StateDirectory, state: StateStore) {
        self.init(stateDirectory: stateDirectory, state: state, burstWindow: Self.defaultBurstWindow, clock: { Date() })
    }

    /// - Parameters: as the public init; `burstWindow` in seconds, `clock` gives "now" (tests).
    init(stateDirectory: StateDirectory, state: StateStore, burstWindow: TimeInterval, clock: @escaping @Sendable () -> Date) {
        self.url = stateDirectory.url.appendingPathComponent(Self.fileName, isDirectory: false)
        self.state = state
        self.burstWindow = burstWindow
        self.clock = clock
    }

    deinit { flush() }

    // MARK: Writing

    /// Records `event` (or counts it into an open burst). Thread-safe; never throws: a failure
    /// to write is reported on stderr once per `AuditLog`.
    public func record(_ event: AuditEvent) {
        lock.lock()
        defer { lock.unlock() }
        let now = clock()
        var due = takeClosedBursts(at: now)
        let key = event.burstKey
        if var burst = bursts[key] {
            if burst.first == nil { burst.first = (event, now) }
            burst.count += 1
            bursts[key] = burst
            scheduleTimerLocked()
        } else {
            bursts[key] = Burst(opened: now)
            due.append((event, now, 1))
        }
        writeLocked(due)
    }

    /// Writes every counted event of every open burst now (the mount calls it when it stops,
    /// the CLI before it exits). Thread-safe; never throws (see `record`).
    public func flush() {
        lock.lock()
        defer { lock.unlock() }
        writeLocked(takeAllBursts())
    }

    /// Writes `events` at once, with every pending burst count before them, and returns only
    /// once they are in the log and its tail in `state.db`: for a change that must not be made
    /// unrecorded (a declassification of managed data), which the caller makes only after this
    /// returns. Identical events (as a burst counts them) become one record: the first, with
    /// their count. Thread-safe.
    /// - Throws: `MAMError` when the log or its tail in `state.db` cannot be written (the
    ///   log's open, lock, write or fsync failed: no room, no permission, a read-only state);
    ///   the records may then be in the log without its tail, which the next append takes up.
    public func recordNow(_ events: [AuditEvent]) throws {
        guard !events.isEmpty else { return }
        lock.lock()
        defer { lock.unlock() }
        var due = takeAllBursts()
        let now = clock()
        var groups: [(AuditEvent, Date, Int64)] = []
        var index: [AuditEvent.BurstKey: Int] = [:]
        for event in events {
            if let at = index[event.burstKey] {
                groups[at].2 += 1
            } else {
                index[event.burstKey] = groups.count
                groups.append((event, now, 1))
            }
        }
        due += groups
        try append(due)
    }

    /// Removes every burst; returns their pending records, oldest first.
    private func takeAllBursts() -> [(AuditEvent, Date, Int64)] {
        let due = bursts.values.compactMap { burst in burst.first.map { ($0.event, $0.date, burst.count) } }
            .sorted { $0.1 < $1.1 }
        bursts.removeAll()
        return due
    }

    /// Removes the bursts whose window has closed at `now`; returns their pending records.
    private func takeClosedBursts(at now: Date) -> [(AuditEvent, Date, Int64)] {
        var due: [(AuditEvent, Date, Int64)] = []
        for (key, burst) in bursts where now.timeIntervalSince(burst.opened) >= burstWindow {
            if let first = burst.first { due.append((first.event, first.date, burst.count)) }
            bursts[key] = nil
        }
        return due.sorted { $0.1 < $1.1 }
    }

    /// Makes sure the pending counts are written soon after their window closes even when no
    /// further event arrives.
    private func scheduleTimerLocked() {
        guard !timerScheduled else { return }
        timerScheduled = true
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + burstWindow) { [weak self] in
            guard let self else { return }
            self.lock.lock()
            self.timerScheduled = false
            let due = self.takeClosedBursts(at: self.clock())
            if self.bursts.values.contains(where: { $0.count > 0 }) { self.scheduleTimerLocked() }
            self.writeLocked(due)
            self.lock.unlock()
        }
    }

    private func writeLocked(_ entries: [(AuditEvent, Date, Int64)]) {
        guard !entries.isEmpty else { return }
        do {
            try append(entries)
        } catch {
            if !reportedFailure {
                reportedFailure = true
                FileHandle.standardError.write(Data("mamfs: audit log \(url.path): \(error) (further failures are not reported)\n".utf8))
            }
        }
    }

    /// Appends one record per entry under the log's exclusive lock, chained to the tail, then
    /// fsyncs and stores the new tail in `state.db`.
    private func append(_ entries: [(AuditEvent, Date, Int64)]) throws {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(url.path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
        } catch {
            throw MAMError.system("open \(url.path)", errno: error.rawValue)
        }
        try Self.lockFile(file.rawValue, LOCK_EX, path: url.path)
        let info: stat
        do { info = try file.stat() } catch { throw MAMError.system("stat \(url.path)", errno: error.rawValue) }
        if info.st_mode & 0o7777 != 0o600, info.st_uid == geteuid() { fchmod(file.rawValue, 0o600) }

        let stored = try state.auditTail() ?? AuditTail(seq: 0, hash: AuditRecord.initialHash)
        let (last, endsWithNewline) = try Self.lastLine(of: file, size: Int64(info.st_size))
        var tail = try Self.catchUp(stored, last: last, file: file, size: Int64(info.st_size))
        var bytes: [UInt8] = endsWithNewline ? [] : [UInt8(ascii: "\n")]
        for (event, date, count) in entries {
            let record = try AuditRecord(seq: tail.seq + 1, date: date, event: event, count: count).chained(after: tail.hash)
            bytes += record.canonicalJSON(includingHash: true)
            bytes.append(UInt8(ascii: "\n"))
            tail = AuditTail(seq: record.seq, hash: record.hash)
        }
        // O_APPEND: the offset is ignored, every write goes to the end of the file. A write or
        // fsync that fails (a full disk) may have left part of a record, and a tail the state
        // cannot store (a read-only or full state) would leave records the state does not vouch
        // for, which `verify` reports as appended by something else: either way the log is cut
        // back to its length before (under the same lock), so the append is all or nothing and
        // a command whose record failed leaves none.
        let fd = file.rawValue
        do {
            try bytes.withUnsafeBytes { try FileIO.pwriteFully(fd, $0, at: 0) }
            do { try file.sync() } catch { throw MAMError.system("fsync \(url.path)", errno: error.rawValue) }
            try state.setAuditTail(tail)
        } catch {
            _ = ftruncate(fd, info.st_size)
            _ = fsync(fd)
            throw error
        }
    }

    // MARK: Reading

    /// The records of the log, oldest first (pending burst counts of this object excluded:
    /// `flush()` first to see them).
    /// - Parameters:
    ///   - since: only records whose `time` is at or after it.
    ///   - account: only records whose `owner` is this accountId (case-insensitive).
    /// - Returns: [] when there is no log.
    /// - Throws: `MAMError.authenticationFailed` for a line that is not a record (a damaged
    ///   log: `verify()` names it); `MAMError.system` when the log cannot be read.
    public func records(since: Date? = nil, account: String? = nil) throws -> [AuditRecord] {
        guard let lines = try readLocked(LOCK_SH)?.lines else { return [] }
        let owner = account.map(AccountIdentity.canonical)
        var result: [AuditRecord] = []
        for (index, line) in lines.enumerated() {
            guard let record = AuditRecord.parse(line) else {
                throw MAMError.authenticationFailed("\(url.path): line \(index + 1) is not an audit record (see 'mamfs audit verify')")
            }
            if let since, let date = record.date, date < since { continue }
            if let owner, AccountIdentity.canonical(record.owner) != owner { continue }
            result.append(record)
        }
        return result
    }

    /// Recomputes the chain and compares its end with `state.db`. Detects an edited record
    /// (its hash or canonical form no longer match), a removed or reordered record (a gap in
    /// seq), a cut last line, records removed from the end and a removed log (the state
    /// recorded more), and a last record edited with every hash recomputed (the state's hash differs).
    /// - Returns: `.verified(records:)` or `.broken(seq:reason:)` for the first bad record.
    /// - Throws: `MAMError.system` when the log or state cannot be read.
    public func verify() throws -> AuditVerification {
        guard let snapshot = try readLocked(LOCK_SH) else {
            if let tail = try state.auditTail(), tail.seq > 0 {
                return .broken(seq: 1, reason: "\(Self.fileName) is missing, but the state records \(tail.seq) record\(tail.seq == 1 ? "" : "s")")
            }
            return .verified(records: 0)
        }
        var previous = AuditRecord.initialHash
        var seq: Int64 = 0
        let lines = snapshot.lines
        for (index, line) in lines.enumerated() {
            let expected = seq + 1
            let isCut = index == lines.count - 1 && !snapshot.endsWithNewline
            guard let record = AuditRecord.parse(line) else {
                return .broken(seq: expected, reason: isCut ? "record \(expected) is cut off (line \(index + 1) is incomplete)"
                                                           : "line \(index + 1) is not a record")
            }
            if record.seq != expected {
                return .broken(seq: expected, reason: "record \(expected) is missing: line \(index + 1) holds record \(record.seq) (removed or reordered)")
            }
            if isCut {
                return .broken(seq: expected, reason: "record \(expected) is cut off (its line has no end)")
            }
            guard try record.chainHash(after: previous) == record.hash,
                  record.canonicalJSON(includingHash: true).elementsEqual(line) else {
                return .broken(seq: expected, reason: "record \(expected) was edited (its hash does not match)")
            }
            previous = record.hash
            seq = expected
        }
        guard let stored = snapshot.stored else {
            return seq == 0 ? .verified(records: 0)
                : .broken(seq: 1, reason: "the state has no record of the audit log, which holds \(seq) records")
        }
        if stored.seq > seq {
            let missing = stored.seq == seq + 1 ? "record \(seq + 1) is" : "records \(seq + 1) to \(stored.seq) are"
            return .broken(seq: seq + 1, reason: "\(missing) missing from the end (the state records \(stored.seq))")
        }
        if stored.seq < seq {
            return .broken(seq: stored.seq + 1, reason: "record \(stored.seq + 1) is not in the state (it records \(stored.seq)): appended by something else")
        }
        if stored.hash != previous {
            return .broken(seq: seq, reason: "record \(seq) differs from the one the state recorded (edited and re-hashed)")
        }
        return .verified(records: seq)
    }

    /// The log's lines (the last one possibly without its newline) and the state's tail, read
    /// under `flock(operation)`; nil when there is no log.
    private func readLocked(_ operation: Int32) throws -> Snapshot? {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        } catch {
            if error.rawValue == ENOENT { return nil }
            throw MAMError.system("open \(url.path)", errno: error.rawValue)
        }
        try Self.lockFile(file.rawValue, operation, path: url.path)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let fd = file.rawValue
            let count = try chunk.withUnsafeMutableBytes { try FileIO.preadFully(fd, $0, at: Int64(bytes.count)) }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        let stored = try state.auditTail()
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        let endsWithNewline = bytes.last == UInt8(ascii: "\n") || bytes.isEmpty
        if endsWithNewline, lines.last?.isEmpty == true { lines.removeLast() }
        return Snapshot(lines: lines, endsWithNewline: endsWithNewline, stored: stored)
    }

    /// The log as read under its lock, with the state's tail read under the same lock.
    private struct Snapshot {
        /// The lines, without their newlines.
        let lines: [ArraySlice<UInt8>]
        /// False when the last line was cut off before its newline.
        let endsWithNewline: Bool
        let stored: AuditTail?
    }

    /// `stored` moved past the records appended after it that the state does not know yet: a
    /// process stopped between its fsync and its state update, or the state could not be
    /// written (read-only, full) while the log could. They must follow `stored` by seq and
    /// chain from its hash; otherwise `stored` is returned (`verify()` names the break).
    /// Reads the whole log only when more than one record is ahead.
    private static func catchUp(_ stored: AuditTail, last: [UInt8]?, file: borrowing FileDescriptor, size: Int64) throws -> AuditTail {
        guard let last, let lastRecord = AuditRecord.parse(last), lastRecord.seq > stored.seq else { return stored }
        var ahead: [AuditRecord] = [lastRecord]
        if lastRecord.seq > stored.seq + 1 {
            var bytes = [UInt8](repeating: 0, count: Int(size))
            let fd = file.rawValue
            let count = try bytes.withUnsafeMutableBytes { try FileIO.preadFully(fd, $0, at: 0) }
            var lines = bytes[0..<count].split(separator: UInt8(ascii: "\n"))
            lines.removeLast()  // the last line, parsed above
            while ahead[0].seq > stored.seq + 1, let line = lines.popLast() {
                guard let record = AuditRecord.parse(line), record.seq == ahead[0].seq - 1 else { return stored }
                ahead.insert(record, at: 0)
            }
        }
        var tail = stored
        for record in ahead {
            guard record.seq == tail.seq + 1, (try? record.chainHash(after: tail.hash)) == record.hash else { return stored }
            tail = AuditTail(seq: record.seq, hash: record.hash)
        }
        return tail
    }

    /// The last line of the open log of `size` bytes (without its newline; nil for an empty
    /// file) and whether the file ends with a newline.
    private static func lastLine(of file: borrowing FileDescriptor, size: Int64) throws -> ([UInt8]?, Bool) {
        guard size > 0 else { return (nil, true) }
        let length = Int(min(size, 1 << 16))
        var buffer = [UInt8](repeating: 0, count: length)
        let fd = file.rawValue
        let count = try buffer.withUnsafeMutableBytes { try FileIO.preadFully(fd, $0, at: size - Int64(length)) }
        let tail = buffer[0..<count]
        let endsWithNewline = tail.last == UInt8(ascii: "\n")
        let body = endsWithNewline ? tail.dropLast() : tail
        let start = body.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? body.startIndex
        return (Array(body[start...]), endsWithNewline)
    }

    /// flock(2), retried on EINTR.
    private static func lockFile(_ fd: Int32, _ operation: Int32, path: String) throws {
        while flock(fd, operation) != 0 {
            if errno == EINTR { continue }
            throw MAMError.fromErrno("lock \(path)")
        }
    }
}
