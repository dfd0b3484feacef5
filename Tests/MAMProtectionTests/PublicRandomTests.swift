import Foundation
import Synchronization
import Testing
@testable import MAMProtection

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

    @Test("a forked child draws bytes of its own instead of the parent's next ones")
    func forkedChildDrawsItsOwnBytes() throws {
        _ = try PublicRandom.bytes(16)  // fills the pool: without the fork check, parent and child would hand out the same bytes next
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        let child = fork()
        if child == 0 {
            // Only this thread survives the fork: a lock another one held would hang the child,
            // which then dies by SIGALRM and fails the test instead.
            alarm(20)
            close(pipeEnds[0])
            var status: Int32 = 1
            if let bytes = try? PublicRandom.bytes(16) {
                status = bytes.withUnsafeBytes { write(pipeEnds[1], $0.baseAddress, $0.count) } == bytes.count ? 0 : 1
            }
            _exit(status)
        }
        #expect(child > 0)
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        var fromChild = [UInt8](repeating: 0, count: 16)
        let got = fromChild.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
        var status: Int32 = 0
        #expect(waitpid(child, &status, 0) == child)
        #expect(status == 0, "the child's draw failed")
        #expect(got == 16)
        let inParent = try PublicRandom.bytes(16)
        #expect(fromChild != inParent, "the child handed out the parent's next bytes")
    }
}
