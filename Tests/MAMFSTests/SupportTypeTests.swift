import Dispatch
import Foundation
import Glibc
import Testing
@testable import MAMFS

@Suite("Pending evictions")
struct PendingEvictionsTests {
    @Test("Counts per directory go up and down and never below zero")
    func counts() {
        let pending = PendingEvictions()
        let a = BackingKey(device: 1, inode: 10)
        let b = BackingKey(device: 1, inode: 11)
        pending.add(directory: a)
        pending.add(directory: a)
        pending.add(directory: b)
        #expect(pending.count(directory: a) == 2)
        #expect(pending.count(directory: b) == 1)
        pending.remove(directory: a)
        #expect(pending.count(directory: a) == 1)
        pending.remove(directory: a)
        pending.remove(directory: a)
        #expect(pending.count(directory: a) == 0)
        #expect(pending.count(directory: b) == 1)
    }

    @Test("A waiter wakes when the last pending child of its directory is removed")
    func waiterWakes() {
        let pending = PendingEvictions()
        let directory = BackingKey(device: 2, inode: 20)
        pending.add(directory: directory)
        let woke = DispatchSemaphore(value: 0)
        let thread = Thread {
            pending.wait(directory: directory, milliseconds: 60_000)
            woke.signal()
        }
        thread.start()
        // The waiter is still waiting while a child is pending.
        #expect(woke.wait(timeout: .now() + 0.2) == .timedOut)
        pending.remove(directory: directory)
        #expect(woke.wait(timeout: .now() + 30) == .success)
    }
}

@Suite("Buffer pool")
struct BufferPoolTests {
    @Test("A released buffer is handed out again; sizes are exactly what was asked")
    func reuse() {
        let pool = BufferPool(capacity: 4096)
        let first = pool.withBuffer(100) { buffer -> UnsafeMutableRawPointer? in
            #expect(buffer.count == 100)
            return buffer.baseAddress
        }
        let second = pool.withBuffer(4096) { buffer -> UnsafeMutableRawPointer? in
            #expect(buffer.count == 4096)
            return buffer.baseAddress
        }
        #expect(first != nil)
        #expect(first == second)
        #expect(pool.idleCount == 1)
    }

    @Test("A request larger than the capacity gets its own buffer, not kept")
    func oversize() {
        let pool = BufferPool(capacity: 1024)
        let pooled = pool.withBuffer(10) { $0.baseAddress }
        let big = pool.withBuffer(5000) { buffer -> UnsafeMutableRawPointer? in
            #expect(buffer.count == 5000)
            buffer.initializeMemory(as: UInt8.self, repeating: 0xAB)
            return buffer.baseAddress
        }
        #expect(big != pooled)
        #expect(pool.idleCount == 1)
    }

    @Test("Concurrent users never share a buffer")
    func concurrentUse() {
        let pool = BufferPool(capacity: 1 << 16)
        let nested = pool.withBuffer(8) { outer in pool.withBuffer(8) { inner in outer.baseAddress != inner.baseAddress } }
        #expect(nested)
        #expect(pool.idleCount == 2)
        let failures = Counter()
        DispatchQueue.concurrentPerform(iterations: 64) { round in
            pool.withBuffer(1 << 16) { buffer in
                let byte = UInt8(truncatingIfNeeded: round)
                buffer.initializeMemory(as: UInt8.self, repeating: byte)
                usleep(200)
                if buffer.contains(where: { $0 != byte }) { failures.increment() }
            }
        }
        #expect(failures.value == 0)
        #expect(pool.idleCount >= 2)
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func increment() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }
}

@Suite("Policy facts per state generation")
struct PolicyFactsTests {
    @Test("facts are worked out once per account and generation; a new generation works them out again")
    func perGeneration() {
        let facts = PolicyFacts()
        var computed: [String] = []
        func fact(_ account: String, _ generation: UInt64, managed: Bool) -> PolicyFacts.Fact {
            facts.fact(account, generation: generation) {
                computed.append("\(account)@\(generation)")
                return PolicyFacts.Fact(account: account, isManaged: managed, mountLocation: .localDrive)
            }
        }
        #expect(fact("a", 1, managed: true).isManaged)
        #expect(fact("a", 1, managed: false).isManaged, "kept for generation 1")
        #expect(!fact("b", 1, managed: false).isManaged)
        #expect(!fact("a", 2, managed: false).isManaged, "generation 2 asks again")
        #expect(fact("a", 1, managed: true).isManaged, "an older generation's answer is its own")
        #expect(!fact("a", 2, managed: true).isManaged, "and is not kept over generation 2's")
        #expect(computed == ["a@1", "b@1", "a@2", "a@1"])
    }
}
