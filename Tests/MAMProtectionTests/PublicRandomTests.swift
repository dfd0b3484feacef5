import Foundation
import Synchronization
import Testing
@testable import MAMProtection
import MAMTestSupport

/// The shared pool of random bytes for nonces and file ids (`PublicRandom`): no byte is handed
/// out twice, across refills, threads and a fork.
@Suite("Random bytes for public values")
struct PublicRandomTests {
    @Test("draws across several refills of the pool never repeat")
    func drawsNeverRepeat() throws {
        // 12-byte draws: 3,000 of them take the pool's 4 KiB nine times over.
        var seen = Set<[UInt8]>()
        for _ in 0..<3_000 {
            let drawn = try PublicRandom.bytes(AESGCM.nonceSize)
            #expect(drawn.count == AESGCM.nonceSize)
            #expect(seen.insert(drawn).inserted, "a nonce was handed out twice")
        }
    }

    @Test("threads drawing at once get bytes of their own")
    func concurrentDrawsNeverRepeat() throws {
        let drawn = Mutex<[[UInt8]]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var mine: [[UInt8]] = []
            for _ in 0..<500 { if let bytes = try? PublicRandom.bytes(16) { mine.append(bytes) } }
            drawn.withLock { $0 += mine }
        }
        let all = drawn.withLock { $0 }
        #expect(all.count == 4_000)
        #expect(Set(all).count == all.count, "two threads got the same bytes")
    }

    @Test("requests larger than the pooled limit, and empty ones, are served whole")
    func largeAndEmptyRequests() throws {
        let large = try PublicRandom.bytes(PublicRandom.largestPooled + 1)
        #expect(large.count == PublicRandom.largestPooled + 1)
        #expect(Set(large).count > 100, "the bytes are not random")
        #expect(try PublicRandom.bytes(0).isEmpty)
    }

    @Test("a forked child empties its copy of the pool and draws bytes of its own")
    func forkedChildDrawsItsOwnBytes() throws {
        _ = try PublicRandom.bytes(16)  // fills the pool: the child must not hand out what is left of it
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        let child = fork()
        if child == 0 {
            // A lock another thread held at the fork would hang the child, which then dies by
            // SIGALRM and fails the test.
            ForkedChild.armTimeout(seconds: 20)
            close(pipeEnds[0])
            // Nothing else runs in the child: what the pool holds now is what the fork left it.
            guard PublicRandom.bytesLeft == 0 else { _exit(2) }
            var status: Int32 = 1
            if let bytes = try? PublicRandom.bytes(16) {
                status = bytes.withUnsafeBytes { write(pipeEnds[1], $0.baseAddress, $0.count) } == bytes.count ? 0 : 1
            }
            _exit(status)
        }
        #expect(child > 0)
        let inParent = try PublicRandom.bytes(16)
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        var fromChild = [UInt8](repeating: 0, count: 16)
        let got = fromChild.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
        var status: Int32 = 0
        #expect(waitpid(child, &status, 0) == child)
        #expect(status != 2 << 8, "the child kept the parent's pool")
        #expect(status == 0, "the child's draw failed (wait status \(status))")
        #expect(got == 16)
        #expect(fromChild != inParent, "the child handed out the parent's next bytes")
    }

    @Test("forks while other threads draw never leave the child a locked pool")
    func forkWhileDrawingDoesNotHangTheChild() throws {
        // The pool is made before the drawers start: a fork while another thread is still
        // making it would leave the child waiting on Swift's once-guard, not on the pool's lock.
        _ = try PublicRandom.bytes(1)
        let stop = Atomic<Bool>(false)
        let drawers = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: drawers) {
                while !stop.load(ordering: .relaxed) { _ = try? PublicRandom.bytes(16) }
            }
        }
        defer {
            stop.store(true, ordering: .relaxed)
            drawers.wait()
        }
        for _ in 0..<30 {
            let child = fork()
            if child == 0 {
                ForkedChild.armTimeout(seconds: 5)
                _exit((try? PublicRandom.bytes(16)) != nil ? 0 : 1)
            }
            try #require(child > 0)
            var status: Int32 = 0
            #expect(waitpid(child, &status, 0) == child)
            guard status == 0 else {
                Issue.record("the child hung on the pool's lock or failed to draw (wait status \(status))")
                break
            }
        }
    }
}
