import Foundation

/// The running counts of one pass (or of the phases of one non-replicated pass, so the items
/// and bytes it reports never go down between phases), reported as `SyncProgress` after each
/// item.
final class SyncProgressCounter {
    private let sink: ((SyncProgress) -> Void)?
    private var done = 0
    private var total = 0
    private var bytesDone: Int64 = 0
    private var bytesTotal: Int64 = 0

    /// - Parameter sink: called with the counts after each item (nil: counts are kept only).
    init(_ sink: ((SyncProgress) -> Void)?) {
        self.sink = sink
    }

    /// Adds `items` items and `bytes` content bytes to what the pass expects.
    func expect(items: Int, bytes: Int64 = 0) {
        total += max(0, items)
        bytesTotal += max(0, bytes)
    }

    /// Records one transfer of `bytes` content bytes that was expected as `estimated` bytes
    /// (the expected total is corrected by the difference).
    func transferred(_ bytes: Int64, estimated: Int64) {
        bytesDone += max(0, bytes)
        bytesTotal += max(0, bytes) - max(0, estimated)
    }

    /// Counts `path` as handled and reports the counts.
    func advance(_ path: String) {
        done += 1
        sink?(current(path))
    }

    /// The counts now, totals never below what is done.
    func current(_ path: String) -> SyncProgress {
        SyncProgress(done: done, total: max(total, done), bytesDone: bytesDone,
                     bytesTotal: max(bytesTotal, bytesDone), path: path)
    }
}
