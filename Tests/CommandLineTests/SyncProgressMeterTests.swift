import Foundation
import MAMFileProvider
import Testing
@testable import mamfs

/// A clock the test moves by hand (seconds).
private final class ManualClock: @unchecked Sendable {
    var now: Double
    init(_ now: Double) { self.now = now }
}

@Suite("SyncProgressMeter: rate and time left of a sync pass, with an injected clock")
struct SyncProgressMeterTests {
    private func progress(_ done: Int, of total: Int, bytes: Int64, of bytesTotal: Int64) -> SyncProgress {
        SyncProgress(done: done, total: total, bytesDone: bytes, bytesTotal: bytesTotal, path: "p")
    }

    @Test("the rate is bytes moved since the start over the seconds passed; the ETA is the bytes left at that rate")
    func rateFromStart() {
        let clock = ManualClock(100)
        var meter = SyncProgressMeter(clock: { clock.now })
        clock.now = 102
        let reading = meter.record(progress(1, of: 5, bytes: 2_000, of: 10_000))
        #expect(reading.bytesPerSecond == 1_000)
        #expect(reading.itemsPerSecond == 0.5)
        #expect(reading.etaSeconds == 8)
        #expect(reading.elapsed == 2)
    }

    @Test("the rate covers the last window only: a fast start no longer counts once it is older than the window")
    func rateOverWindow() {
        let clock = ManualClock(100)
        var meter = SyncProgressMeter(window: 5, clock: { clock.now })
        var bytes: Int64 = 10_000
        clock.now = 101
        _ = meter.record(progress(1, of: 20, bytes: bytes, of: 20_900))
        var last: SyncProgressMeter.Reading?
        for second in 102...110 {
            clock.now = Double(second)
            bytes += 100
            last = meter.record(progress(second - 100, of: 20, bytes: bytes, of: 20_900))
        }
        // From t=105 (10,400 bytes) to t=110 (10,900 bytes): 100 bytes a second, 10,000 left.
        #expect(last?.bytesPerSecond == 100)
        #expect(last?.etaSeconds == 100)
        #expect(last?.itemsPerSecond == 1)
    }

    @Test("nothing moved yet: rate 0 and no ETA; no time passed: rate 0")
    func unknown() {
        let clock = ManualClock(7)
        var meter = SyncProgressMeter(clock: { clock.now })
        let same = meter.record(progress(0, of: 3, bytes: 0, of: 100))
        #expect(same.bytesPerSecond == 0 && same.etaSeconds == nil)
        clock.now = 9
        let stalled = meter.record(progress(0, of: 3, bytes: 0, of: 100))
        #expect(stalled.bytesPerSecond == 0 && stalled.etaSeconds == nil)
    }

    @Test("no bytes left but items left: the ETA is the items left at the item rate; nothing left: 0")
    func itemsOnly() {
        let clock = ManualClock(0)
        var meter = SyncProgressMeter(clock: { clock.now })
        clock.now = 4
        let placeholders = meter.record(progress(8, of: 10, bytes: 500, of: 500))
        #expect(placeholders.itemsPerSecond == 2)
        #expect(placeholders.etaSeconds == 1)
        clock.now = 5
        let finished = meter.record(progress(10, of: 10, bytes: 500, of: 500))
        #expect(finished.etaSeconds == 0)
    }

    @Test("reports closer together than 0.05 s replace each other in the history, so the rate still starts at the start")
    func closeSamples() {
        let clock = ManualClock(50)
        var meter = SyncProgressMeter(window: 1, clock: { clock.now })
        for step in 1...100 {
            clock.now = 50 + Double(step) * 0.001
            _ = meter.record(progress(step, of: 1_000, bytes: Int64(step) * 10, of: 100_000))
        }
        clock.now = 51
        // Window 1 s: the start sample (t=50, 0 bytes) is the one at the window's start.
        let reading = meter.record(progress(100, of: 1_000, bytes: 1_000, of: 100_000))
        #expect(reading.bytesPerSecond == 1_000)
    }

    @Test("outputs are rate-limited to one per interval, the first at once")
    func throttle() {
        let clock = ManualClock(10)
        var meter = SyncProgressMeter(interval: 0.25, clock: { clock.now })
        var emitted: [Bool] = []
        for time in [10, 10.1, 10.25, 10.49, 11] {
            clock.now = time
            emitted.append(meter.shouldEmit())
        }
        #expect(emitted == [true, false, true, false, true])
    }

    @Test("human units: binary, one decimal above bytes; done in the unit of the total; durations m:ss and h:mm:ss")
    func units() {
        #expect(HumanUnits.bytes(0) == "0 B")
        #expect(HumanUnits.bytes(1_023) == "1023 B")
        #expect(HumanUnits.bytes(1_024) == "1.0 KiB")
        #expect(HumanUnits.bytes(3_072_000) == "2.9 MiB")
        #expect(HumanUnits.bytes(5 * 1_073_741_824) == "5.0 GiB")
        #expect(HumanUnits.bytes(400_000, of: 3_072_000) == "0.4/2.9 MiB")
        #expect(HumanUnits.bytes(100, of: 512) == "100/512 B")
        #expect(HumanUnits.duration(nil) == "--:--")
        #expect(HumanUnits.duration(0) == "0:00")
        #expect(HumanUnits.duration(59.2) == "1:00")
        #expect(HumanUnits.duration(3_725) == "1:02:05")
    }

    @Test("the terminal line: items, bytes of the total, rate, ETA, path")
    func lineText() {
        let clock = ManualClock(0)
        var meter = SyncProgressMeter(clock: { clock.now })
        clock.now = 2
        let reading = meter.record(SyncProgress(done: 12, total: 306, bytesDone: 1_048_576, bytesTotal: 3_072_000, path: "d1/f7.bin"))
        #expect(SyncProgressOutput.text(reading) == "12/306 items, 1.0/2.9 MiB, 512.0 KiB/s, ETA 0:04  d1/f7.bin")
    }
}
