import Testing
@testable import MAMFS

@Suite("LogRateLimit: one line per key a minute, the held-back ones counted")
struct LogRateLimitTests {
    @Test("the first line of a key passes, repeats within the interval are held back and counted, the next after it passes with the count")
    func repeatsAreCounted() {
        var limit = LogRateLimit(interval: 60, capacity: 16)
        #expect(limit.admit("a", now: 100) == 0)
        #expect(limit.admit("a", now: 100.5) == nil)
        #expect(limit.admit("a", now: 159.9) == nil)
        // Another key is not held back by the first one's lines.
        #expect(limit.admit("b", now: 101) == 0)
        #expect(limit.admit("a", now: 160) == 2)
        #expect(limit.admit("a", now: 161) == nil)
        #expect(limit.admit("a", now: 220) == 1)
        #expect(limit.admit("b", now: 220) == 0)
    }

    @Test("past its capacity it forgets the keys whose interval ended, then all of them, and never holds back a new key")
    func capacityIsBounded() {
        var limit = LogRateLimit(interval: 60, capacity: 3)
        #expect(limit.admit("old", now: 0) == 0)
        #expect(limit.admit("x", now: 100) == 0)
        #expect(limit.admit("y", now: 100) == 0)
        // Full: "old" (interval over) goes, the held-back state of x and y stays.
        #expect(limit.admit("z", now: 101) == 0)
        #expect(limit.admit("x", now: 102) == nil)
        // Full again with live keys only: all are forgotten, the new key passes.
        #expect(limit.admit("w", now: 103) == 0)
        #expect(limit.admit("x", now: 104) == 0)
    }
}
