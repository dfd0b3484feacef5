import MAMProtection
import Synchronization

/// What a mount's decisions ask of the policies on every open and create, worked out once per
/// account and state generation: whether the account is managed here (its files are work
/// files) and, when the policy's `locations` put the whole mount in one place, that location.
///
/// Accounts are few (the mount's own, the owners of its files), so they are kept in a short
/// list compared by equality; a new generation (any state change: policy set, enroll, wipe)
/// starts the list again.
final class PolicyFacts: Sendable {
    struct Fact: Sendable {
        /// The canonical accountId (or UPN) asked for.
        let account: String
        /// The account has a policy here (a managed account: its files are work files).
        let isManaged: Bool
        /// The location of everything in the mount for the account's policy; nil when its
        /// `locations` split the mount (each path is then looked up).
        let mountLocation: StorageLocation?
    }

    private struct Table {
        var generation: UInt64 = 0
        var facts: [Fact] = []
    }
    private let table = Mutex(Table())
    /// Accounts kept per generation (more: the list starts again).
    static let capacity = 32

    /// The facts about `account` (canonical) under `generation`, worked out by `compute` when
    /// not known for that generation.
    func fact(_ account: String, generation: UInt64, compute: () -> Fact) -> Fact {
        let known = table.withLock { table -> Fact? in
            guard table.generation == generation else { return nil }
            return table.facts.first { $0.account == account }
        }
        if let known { return known }
        let fact = compute()
        table.withLock { table in
            guard generation >= table.generation else { return }
            if generation > table.generation || table.facts.count >= PolicyFacts.capacity {
                table = Table(generation: generation)
            }
            table.facts.append(fact)
        }
        return fact
    }
}
