import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport
import Synchronization

/// The wal-index header a running context reads instead of asking SQLite on every open:
/// it must move with every commit of any connection, and a context that trusts it must still
/// see every change of another process at its next refresh.
@Suite("State commit marker")
struct StateCommitMarkerTests {
    private static func policy(requiringEncryption required: Bool) -> Policy {
        var policy = Policy.demoEncrypting
        policy.fileEncryptionRequired = required
        return policy
    }

    @Test("the marker moves with every commit, of this connection or another, and only then")
    func markerMovesWithEveryCommit() throws {
        let f = try StateFixture()
        let mount = f.context.state
        let cli = try StateStore.open(directory: f.stateDirectory, create: false)
        let first = try #require(mount.commitMarker())
        #expect(mount.commitMarker() == first)
        _ = try mount.dataVersion()
        #expect(mount.commitMarker() == first, "a read moves nothing")
        try cli.setMetaValue(Data([1]), forKey: "marker-test")
        let second = try #require(mount.commitMarker())
        #expect(second != first)
        #expect(cli.commitMarker() == second, "both connections read the same header")
        try mount.setMetaValue(Data([2]), forKey: "marker-test")
        let third = try #require(mount.commitMarker())
        #expect(third != second)
        // The same value again: SQLite writes no frame, and its own check (data_version, which
        // compares this same header) sees no change either. The two always agree.
        let version = try mount.dataVersion()
        try cli.setMetaValue(Data([2]), forKey: "marker-test")
        #expect((mount.commitMarker() != third) == (try mount.dataVersion() != version))
        try cli.setMetaValue(Data([3]), forKey: "marker-test")
        #expect(mount.commitMarker() != third)
        #expect(try mount.dataVersion() != version)
    }

    @Test("an unmoved marker spares the database; every commit of another connection is seen at the next refresh")
    func refreshTrustsOnlyAnUnmovedMarker() throws {
        let f = try StateFixture()
        let other = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        _ = f.context.refreshIfChanged()
        let checks = f.context.databaseChecks.load(ordering: .relaxed)
        for _ in 0..<200 { #expect(f.context.refreshIfChanged() == false) }
        // At most one more, should the run stall past the marker's trust.
        #expect(f.context.databaseChecks.load(ordering: .relaxed) - checks <= 1)

        for round in 0..<30 {
            // The fixture's policy requires encryption: round 0 changes it.
            let required = !round.isMultiple(of: 2)
            try other.enrollment.setPolicy(StateFixture.managedId, Self.policy(requiringEncryption: required))
            #expect(f.context.refreshIfChanged(), "round \(round)")
            #expect(f.context.policyEvaluator.isFileEncryptionRequired(accountId: StateFixture.managedId) == required)
            #expect(f.context.refreshIfChanged() == false)
        }
    }

    @Test("after the marker's trust runs out the database is asked again")
    func markerTrustRunsOut() throws {
        let f = try StateFixture()
        _ = f.context.refreshIfChanged()
        _ = f.context.refreshIfChanged()
        let checks = f.context.databaseChecks.load(ordering: .relaxed)
        Thread.sleep(forTimeInterval: ProtectionContext.markerTrustSeconds + 0.1)
        #expect(f.context.refreshIfChanged() == false)
        #expect(f.context.databaseChecks.load(ordering: .relaxed) == checks + 1)
    }

    @Test("threads refreshing at once never leave a committed change unseen")
    func concurrentRefreshesSeeEveryCommit() throws {
        let f = try StateFixture()
        let other = try ProtectionContext.open(stateDirectory: f.stateDirectory, passphraseFile: nil)
        let context = f.context
        let stop = StopFlag()
        let done = DispatchGroup()
        for _ in 0..<4 {
            done.enter()
            Thread {
                defer { done.leave() }
                while !stop.raised.load(ordering: .relaxed) { _ = context.refreshIfChanged() }
            }.start()
        }
        defer {
            stop.raised.store(true, ordering: .relaxed)
            done.wait()
        }
        for round in 0..<40 {
            let required = !round.isMultiple(of: 2)
            try other.enrollment.setPolicy(StateFixture.managedId, Self.policy(requiringEncryption: required))
            _ = f.context.refreshIfChanged()
            #expect(f.context.policyEvaluator.isFileEncryptionRequired(accountId: StateFixture.managedId) == required,
                    "round \(round)")
        }
    }

    @Test("no marker from a wal-index header that is foreign or not initialised, nor from a closed connection")
    func untrustedHeaderGivesNoMarker() throws {
        let f = try StateFixture()
        let database = f.stateDirectory.databaseURL.path
        #expect(f.context.state.commitMarker() != nil)
        // The header as the -shm file holds it: the same bytes SQLite maps.
        let header = [UInt8](try Data(contentsOf: URL(fileURLWithPath: database + "-shm")).prefix(SQLiteCommitMarker.headerBytes))
        try #require(header.count == SQLiteCommitMarker.headerBytes)
        func marker(_ bytes: [UInt8]) -> SQLiteCommitMarker? {
            bytes.withUnsafeBytes { SQLiteCommitMarker(walIndex: $0.baseAddress!) }
        }
        #expect(marker(header) == f.context.state.commitMarker(), "the mapping and the file agree")
        var foreign = header
        foreign[0] ^= 0xff
        #expect(marker(foreign) == nil)
        var uninitialised = header
        uninitialised[12] = 0
        #expect(marker(uninitialised) == nil)
        #expect(marker([UInt8](repeating: 0, count: SQLiteCommitMarker.headerBytes)) == nil)

        let store = try StateStore.open(directory: f.stateDirectory, create: false)
        #expect(store.commitMarker() != nil)
        store.close()
        #expect(store.commitMarker() == nil)
    }
}

/// Tells the refreshing threads to end.
private final class StopFlag: Sendable {
    let raised = Atomic<Bool>(false)
}
