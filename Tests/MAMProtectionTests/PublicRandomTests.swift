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
        let child = ForkedChild.run {
            // Nothing else runs in the child: what the pool holds now is what the fork left it.
            guard PublicRandom.bytesLeft == 0 else { _exit(2) }
            return try? PublicRandom.bytes(16)
        }
        let inParent = try PublicRandom.bytes(16)
        #expect(child.status != 2 << 8, "the child kept the parent's pool")
        #expect(child.status == 0, "the child's draw failed (wait status \(child.status))")
        #expect(child.bytes.count == 16)
        #expect(child.bytes != inParent, "the child handed out the parent's next bytes")
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
            let child = ForkedChild.run(timeout: 5) { try? PublicRandom.bytes(16) }
            guard child.status == 0, child.bytes.count == 16 else {
                Issue.record("the child hung on the pool's lock or failed to draw (wait status \(child.status))")
                break
            }
        }
    }
}
