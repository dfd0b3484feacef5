import Foundation
import MAMFileProvider

/// What `provider sync` shows of a running pass: on a terminal (stderr a tty) one line redrawn
/// in place (`ProgressLine`) with items, bytes, rate and time left; with `--json` one JSON
/// object per line on stdout (`progress` events, then one `done`); otherwise nothing. Both
/// are rate-limited by `SyncProgressMeter` (4 a second); the last report is always written.
///
/// Progress line: `N/M items, D/T UNIT, R UNIT/s, ETA m:ss  PATH`.
/// `progress` event: {"event":"progress","items","itemsTotal","bytes","bytesTotal",
/// "bytesPerSecond","etaSeconds" (null when unknown),"path"}; counts are items and bytes of
/// content moved (`SyncProgress`), rates per second over the last 5 s.
/// `done` event: {"event":"done","items","itemsTotal","bytes","bytesTotal","elapsedSeconds",
/// "exitCode", and the report's fields (`SyncReport`: fetched, placeholders, deletedLocally,
/// movedLocally, created, modified, deletedRemotely, movedRemotely, conflicts, refused,
/// errors [{path, message, errno}], complete, anchor)}.
final class SyncProgressOutput {
    private let json: Bool
    private let line: ProgressLine
    private var meter: SyncProgressMeter
    private var last: SyncProgressMeter.Reading?
    private var lastWritten = false

    /// - Parameters:
    ///   - prefix: the terminal line's prefix.
    ///   - json: JSON lines on stdout instead of the terminal line.
    init(prefix: String, json: Bool, meter: SyncProgressMeter = SyncProgressMeter()) {
        self.json = json
        self.meter = meter
        line = ProgressLine(prefix: prefix, interval: meter.interval)
    }

    /// Takes one report of the pass (called after each item).
    func update(_ progress: SyncProgress) {
        guard json || line.isEnabled else { return }
        let reading = meter.record(progress)
        last = reading
        lastWritten = false
        guard meter.shouldEmit() else { return }
        write(reading)
    }

    /// The pass ended: the last report is written (JSON: always, also when the pass reported
    /// nothing; terminal: when there was anything to do) and the terminal line is ended.
    func finish() {
        let reading = last ?? meter.record(SyncProgress(done: 0, total: 0, path: ""))
        if json {
            if !lastWritten { write(reading) }
        } else if reading.progress.total > 0 || reading.progress.bytesTotal > 0 {
            line.finish(showing: Self.text(reading))
        }
    }

    /// The pass failed before it could report: the terminal line is cleared.
    func abandon() {
        if !json { line.finish() }
    }

    /// Writes the `done` event for `report` (JSON only).
    func done(_ report: SyncReport) throws {
        guard json else { return }
        let progress = last?.progress ?? SyncProgress(done: 0, total: 0, path: "")
        let encoded = try attempt(nil) { try JSONEncoder().encode(report) }
        var object = (try? JSONSerialization.jsonObject(with: encoded)) as? [String: Any] ?? [:]
        object["event"] = "done"
        object["items"] = progress.done
        object["itemsTotal"] = progress.total
        object["bytes"] = progress.bytesDone
        object["bytesTotal"] = progress.bytesTotal
        object["elapsedSeconds"] = Self.rounded(last?.elapsed ?? 0)
        object["exitCode"] = Int(report.exitCode.rawValue)
        Output.out(try JSON.line(object))
    }

    private func write(_ reading: SyncProgressMeter.Reading) {
        lastWritten = true
        if json {
            let p = reading.progress
            let object: [String: Any] = [
                "event": "progress", "items": p.done, "itemsTotal": p.total, "bytes": p.bytesDone,
                "bytesTotal": p.bytesTotal, "bytesPerSecond": Self.rounded(reading.bytesPerSecond),
                "etaSeconds": reading.etaSeconds.map { Self.rounded($0) as Any } ?? NSNull(), "path": p.path,
            ]
            if let text = try? JSON.line(object) { Output.out(text) }
        } else {
            line.update(Self.text(reading))
        }
    }

    /// The terminal line's text (after the prefix).
    static func text(_ reading: SyncProgressMeter.Reading) -> String {
        let p = reading.progress
        let rate = HumanUnits.bytes(Int64(reading.bytesPerSecond.rounded())) + "/s"
        var text = "\(p.done)/\(p.total) items, \(HumanUnits.bytes(p.bytesDone, of: p.bytesTotal)), \(rate), ETA \(HumanUnits.duration(reading.etaSeconds))"
        if !p.path.isEmpty { text += "  " + p.path }
        return text
    }

    /// Seconds or bytes per second to a tenth.
    private static func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }
}
