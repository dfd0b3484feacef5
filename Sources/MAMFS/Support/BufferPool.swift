import Synchronization

/// Reusable raw buffers for read replies (no per-request allocation of up to 1 MiB).
///
/// Buffers of `capacity` bytes are kept once allocated and handed to one caller at a time; a
/// request larger than `capacity` gets a buffer of its own, freed when it returns.
final class BufferPool: Sendable {
    /// Bytes of each pooled buffer.
    let capacity: Int
    private let free = Mutex<[Allocation]>([])

    /// A pooled buffer; only one caller uses it at a time (it is out of the pool meanwhile).
    private struct Allocation: @unchecked Sendable {
        let bytes: UnsafeMutableRawBufferPointer
    }

    init(capacity: Int) { self.capacity = capacity }

    deinit {
        free.withLock { buffers in
            for buffer in buffers { buffer.bytes.deallocate() }
            buffers.removeAll()
        }
    }

    /// Runs `body` with a buffer of exactly `size` bytes (contents unspecified), returned to the
    /// pool afterwards.
    func withBuffer<R>(_ size: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        if size > capacity {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
            defer { buffer.deallocate() }
            return try body(buffer)
        }
        let buffer = free.withLock { $0.popLast() }
            ?? Allocation(bytes: .allocate(byteCount: capacity, alignment: 64))
        defer { free.withLock { $0.append(buffer) } }
        return try body(UnsafeMutableRawBufferPointer(rebasing: buffer.bytes[0..<size]))
    }

    /// Buffers allocated and idle in the pool now.
    var idleCount: Int { free.withLock { $0.count } }
}
