import CFuseTransport
import Foundation
import Glibc
import Testing
import MAMProtection
@testable import MAMFS
import MAMTestSupport

/// `-o busy_poll=US`: a worker polls /dev/fuse before it blocks (Sources/CFuseTransport/busy_poll.c).
@Suite("Busy polling of /dev/fuse")
struct BusyPollTests {
    /// A pipe whose read end stands for /dev/fuse: busy_poll.c only needs a pollable descriptor.
    private final class Pipe {
        let read: Int32
        var write: Int32
        init() throws {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw MAMError.fromErrno("pipe") }
            read = fds[0]
            write = fds[1]
        }
        func closeWriteEnd() {
            if write >= 0 { Glibc.close(write) }
            write = -1
        }
        deinit {
            _ = mamfs_busy_poll_set(read, 0)
            Glibc.close(read)
            closeWriteEnd()
        }
    }

    private static func wait(_ fd: Int32) -> Int { Int(mamfs_busy_poll_wait(fd)) }

    private static func monotonicSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    @Test("Without a budget the descriptor is not polled; budgets above the limit and descriptors past 1023 are refused")
    func offAndLimits() throws {
        let p = try Pipe()
        #expect(mamfs_busy_poll_set(p.read, 0) == 0)
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_OFF)
        #expect(mamfs_busy_poll_set(p.read, UInt32(mamfs_BUSY_POLL_MAX_US) + 1) == -1)
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_OFF, "a refused budget must not turn polling on")
        #expect(mamfs_busy_poll_set(1024, 50) == -1)
        #expect(mamfs_busy_poll_set(-1, 50) == -1)
        #expect(Self.wait(1024) == mamfs_BUSY_POLL_OFF)
    }

    @Test("A poll with nothing to read lasts the budget; a waiting request, or a hang-up, ends it at once")
    func pollOutcomes() throws {
        let p = try Pipe()
        #expect(mamfs_busy_poll_set(p.read, UInt32(mamfs_BUSY_POLL_MAX_US)) == 0)
        let start = Self.monotonicSeconds()
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_MISSED)
        #expect(Self.monotonicSeconds() - start >= Double(mamfs_BUSY_POLL_MAX_US) / 1e6, "returned before its budget")
        var byte: UInt8 = 7
        #expect(Glibc.write(p.write, &byte, 1) == 1)
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_READY)
        #expect(Glibc.read(p.read, &byte, 1) == 1)
        // The other end gone (an unmounted /dev/fuse answers poll with an error the same way):
        // the worker goes on to read(2), which reports it.
        p.closeWriteEnd()
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_READY)
    }

    @Test("After 8 polls in a row find nothing, polling stops; a request that a poll would have caught turns it back on")
    func adaptsToSparseRequests() throws {
        let p = try Pipe()
        #expect(mamfs_busy_poll_set(p.read, 100) == 0)
        for i in 0..<8 {
            #expect(Self.wait(p.read) == mamfs_BUSY_POLL_MISSED, "poll \(i + 1)")
        }
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_SKIPPED)
        // A request long after the worker began to wait does not turn it back on.
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_SKIPPED)
        usleep(5_000)
        mamfs_busy_poll_received(p.read)
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_SKIPPED)
        // One right after it began to wait does (a budget of 1000 us here, so a scheduling
        // delay between the two calls cannot make the test fail).
        #expect(mamfs_busy_poll_set(p.read, UInt32(mamfs_BUSY_POLL_MAX_US)) == 0)
        for _ in 0..<8 { #expect(Self.wait(p.read) == mamfs_BUSY_POLL_MISSED) }
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_SKIPPED)
        mamfs_busy_poll_received(p.read)
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_MISSED)
        // A new budget forgets the history.
        for _ in 0..<8 { _ = mamfs_busy_poll_wait(p.read) }
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_SKIPPED)
        #expect(mamfs_busy_poll_set(p.read, 100) == 0)
        #expect(Self.wait(p.read) == mamfs_BUSY_POLL_MISSED)
    }

    @Test("Requests that keep arriving 1.5 budgets after the worker began to wait stop the polling for good")
    func requestsJustPastTheBudgetStopIt() throws {
        // A client pacing its requests 1.5 ms apart against a 1 ms budget: every poll would miss.
        // Counting "two requests within twice the budget" as a reason to poll again made the
        // daemon poll before every one of them (10-25x the CPU of no polling, no faster).
        let p = try Pipe()
        #expect(mamfs_busy_poll_set(p.read, UInt32(mamfs_BUSY_POLL_MAX_US)) == 0)
        var results: [Int] = []
        for _ in 0..<20 {
            let began = Self.monotonicSeconds()
            results.append(Self.wait(p.read))
            let left = began + 0.0015 - Self.monotonicSeconds()
            if left > 0 { usleep(UInt32(left * 1e6)) }
            mamfs_busy_poll_received(p.read)
        }
        #expect(results.filter { $0 == mamfs_BUSY_POLL_MISSED }.count == 8, "\(results)")
        #expect(Array(results.suffix(12)) == Array(repeating: mamfs_BUSY_POLL_SKIPPED, count: 12), "\(results)")
    }

    @Test("-o busy_poll=US takes 0 to 1000 microseconds and is not passed to libfuse; other forms are refused")
    func mountOption() throws {
        try MountPlanFixture.with { f in
            for (given, micros) in [("busy_poll=50", UInt32(50)), ("busy_poll=0", 0), ("busy_poll=1000", 1000)] {
                var options = f.options(["ro," + given])
                let plan = try MountDaemon.prepare(&options, context: f.context)
                #expect(options.busyPoll == micros, "-o \(given)")
                #expect(plan.fuseOptions.contains("ro") && !plan.fuseOptions.contains { $0.hasPrefix("busy_poll") }, "-o \(given)")
            }
            var unset = f.options()
            _ = try MountDaemon.prepare(&unset, context: f.context)
            #expect(unset.busyPoll == 0)
            for bad in ["busy_poll", "busy_poll=", "busy_poll=1001", "busy_poll=-1", "busy_poll=+5", "busy_poll=5us", "busy_poll=0x10", "busy_poll=99999999999"] {
                var options = f.options([bad])
                #expect(throws: MAMError.invalidArguments("-o \(bad): expected microseconds from 0 to 1000"), "-o \(bad)") {
                    try MountDaemon.prepare(&options, context: f.context)
                }
            }
        }
    }

    @Test("A mount with -o busy_poll=1000 keeps every byte, and a sparsely used mount stops polling (daemon CPU stays low)",
          .enabled(if: !MountedFixture.useInProcess, "measures the daemon's own CPU time"))
    func mountedBytesAndSparseCost() throws {
        // attr_timeout=0: every stat is a GETATTR; entry_timeout=60: and nothing else.
        try withMount(.managed, options: ["busy_poll=1000", "attr_timeout=0", "entry_timeout=60"]) { m in
            let written = try m.sh("""
            head -c 3000000 /dev/urandom > "$BASE/src" && \
            dd if="$BASE/src" of=f bs=512 status=none && \
            dd if="$BASE/src" of=f bs=4096 seek=100 skip=100 conv=notrunc status=none && \
            cmp "$BASE/src" f && sha256sum < f | cut -d' ' -f1 && sha256sum < "$BASE/src" | cut -d' ' -f1
            """)
            #expect(written.status == 0, "\(written.err)")
            let sums = written.out.split(separator: "\n")
            #expect(sums.count == 2 && sums[0] == sums[1])
            #expect(try m.backingHeader("f") != nil, "the managed file is encrypted on the backing disk")

            // 200 GETATTRs 5 ms apart. Polling 1 ms after each would cost the daemon at least
            // 0.2 s of CPU; after 8 misses it stops, leaving the requests' own cost.
            let pid = try #require(m.daemonPID)
            let before = try Self.cpuSeconds(pid)
            var st = stat()
            for _ in 0..<200 {
                #expect(stat(m.mountpoint + "/f", &st) == 0)
                usleep(5_000)
            }
            #expect(st.st_size == 3_000_000)
            let used = try Self.cpuSeconds(pid) - before
            #expect(used < 0.08, "the daemon used \(used) s of CPU for 200 sparse requests")
        }
    }

    /// utime + stime of every thread of `pid`, in seconds (/proc/PID/stat, clock ticks).
    private static func cpuSeconds(_ pid: pid_t) throws -> Double {
        let text = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = try #require(text.split(separator: ")").last).split(separator: " ")
        let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
