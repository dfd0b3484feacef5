import Foundation
import Synchronization

/// Counts the forks that made this process (`pthread_atfork`'s child handler, registered at the
/// first use): a child never uses random state its parent drew before the fork
/// (`BlockCipher`'s nonces), which the parent goes on using.
enum ForkGeneration {
    private static let counter: Atomic<UInt64> = {
        pthread_atfork(nil, nil, { ForkGeneration.bump() })
        return Atomic<UInt64>(1)
    }()

    /// 1 plus the number of forks between the first use and this process.
    static var current: UInt64 { counter.load(ordering: .relaxed) }

    private static func bump() { counter.add(1, ordering: .relaxed) }
}
