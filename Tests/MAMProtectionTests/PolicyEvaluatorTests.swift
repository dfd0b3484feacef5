import Foundation
import Testing
@testable import MAMProtection

private let alice = "8c7f3e1a-0000-4000-8000-00000000000a"
private let bob = "8c7f3e1a-0000-4000-8000-00000000000b"
private let personal = "8c7f3e1a-0000-4000-8000-0000000000ff"  // not enrolled: unmanaged

/// An evaluator where `alice` (the receiver/owner under test) has `policy` and `bob` is another
/// managed account with the default policy.
private func evaluator(alice policy: Policy) -> PolicyEvaluator {
    PolicyEvaluator(policies: [alice: policy, bob: Policy()])
}

@Suite("Policy evaluator")
struct PolicyEvaluatorTests {
    @Test("encryption decisions follow the account's policy")
    func encryptionRequired() {
        let on = evaluator(alice: Policy(fileEncryptionRequired: true, fileProviderEncryptFiles: false))
        #expect(on.isFileEncryptionRequired(accountId: alice) == true)
        #expect(on.shouldFileProviderEncryptFiles(accountId: alice) == false)
        let off = evaluator(alice: Policy(fileEncryptionRequired: false, fileProviderEncryptFiles: true))
        #expect(off.isFileEncryptionRequired(accountId: alice) == false)
        #expect(off.shouldFileProviderEncryptFiles(accountId: alice) == true)
    }

    @Test("an evaluator made from a table lists every managed account's policy; one made from a lookup does not know them")
    func managedPoliciesListed() throws {
        let split = Policy(locations: try StorageLocations(["SharePoint": ["/mnt/work/share"]]))
        let listed = PolicyEvaluator(policies: [alice: split, bob: Policy()]).managedPolicies
        #expect(listed?.count == 2)
        #expect(listed?.filter { $0.locations.uniformLocation(below: "/mnt/work") == nil }.count == 1)
        #expect(PolicyEvaluator(policies: [:]).managedPolicies?.isEmpty == true)
        #expect(PolicyEvaluator(lookup: { _ in Policy() }).managedPolicies == nil)
    }

    @Test("unmanaged and empty identities never require encryption")
    func encryptionUnmanaged() {
        let e = evaluator(alice: Policy())
        for id in ["", personal, "   ", "not-an-account"] {
            #expect(e.isFileEncryptionRequired(accountId: id) == false)
            #expect(e.shouldFileProviderEncryptFiles(accountId: id) == false)
            #expect(e.policy(forAccountId: id) == nil)
            #expect(e.isManaged(accountId: id) == false)
        }
        #expect(e.isManaged(accountId: bob) == true)
    }

    @Test("the empty identity is never looked up")
    func emptyNotLookedUp() {
        let e = PolicyEvaluator(lookup: { _ in Policy() })  // claims every account is managed
        #expect(e.isFileEncryptionRequired(accountId: "") == false)
        #expect(e.isFileEncryptionRequired(accountId: alice) == true)
    }

    @Test("lookups receive canonical accountIds and comparisons ignore case")
    func caseInsensitive() {
        let e = PolicyEvaluator(lookup: { id in id == alice ? Policy.demoEncrypting : nil })
        #expect(e.isFileEncryptionRequired(accountId: alice.uppercased()) == true)
        #expect(e.isFileEncryptionRequired(accountId: " \(alice.uppercased()) ") == true)
        #expect(e.isSaveToAllowed(location: .dropbox, dataOwner: alice.uppercased()) == false)
        #expect(e.isOpenFromAllowed(location: .photos, receiver: alice.uppercased()) == false)
        // The table initializer canonicalizes its keys too.
        let table = PolicyEvaluator(policies: [alice.uppercased(): Policy(fileEncryptionRequired: false)])
        #expect(table.isManaged(accountId: alice) == true)
        #expect(table.isFileEncryptionRequired(accountId: alice) == false)
    }

    // MARK: canReceiveSharedFile

    @Test("an unmanaged receiver receives anything")
    func receiveUnmanagedReceiver() {
        let e = evaluator(alice: Policy(receiveData: .none))
        for owner in [nil, "", alice, bob, personal] as [String?] {
            #expect(e.canReceiveSharedFile(fileOwner: owner, receiver: personal) == true)
            #expect(e.canReceiveSharedFile(fileOwner: owner, receiver: "") == true)
        }
    }

    @Test("a receiver always receives its own files, in any case", arguments: ReceiveDataPolicy.allCases)
    func receiveOwnFile(receive: ReceiveDataPolicy) {
        let e = evaluator(alice: Policy(receiveData: receive))
        #expect(e.canReceiveSharedFile(fileOwner: alice, receiver: alice) == true)
        #expect(e.canReceiveSharedFile(fileOwner: alice.uppercased(), receiver: alice) == true)
        #expect(e.canReceiveSharedFile(fileOwner: alice, receiver: alice.uppercased()) == true)
    }

    @Test("receiveData all accepts every owner")
    func receiveAll() {
        let e = evaluator(alice: Policy(receiveData: .all))
        #expect(e.canReceiveSharedFile(fileOwner: nil, receiver: alice) == true)
        #expect(e.canReceiveSharedFile(fileOwner: "", receiver: alice) == true)
        #expect(e.canReceiveSharedFile(fileOwner: personal, receiver: alice) == true)
        #expect(e.canReceiveSharedFile(fileOwner: bob, receiver: alice) == true)
    }

    @Test("receiveData managedOnly accepts only managed owners")
    func receiveManagedOnly() {
        let e = evaluator(alice: Policy(receiveData: .managedOnly))
        #expect(e.canReceiveSharedFile(fileOwner: nil, receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: "", receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: personal, receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: bob, receiver: alice) == true)
        #expect(e.canReceiveSharedFile(fileOwner: bob.uppercased(), receiver: alice) == true)
    }

    @Test("receiveData none accepts only the receiver's own files")
    func receiveNone() {
        let e = evaluator(alice: Policy(receiveData: .none))
        #expect(e.canReceiveSharedFile(fileOwner: nil, receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: "", receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: personal, receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: bob, receiver: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: alice, receiver: alice) == true)
    }

    @Test("the receiver's policy decides, not the owner's")
    func receiveUsesReceiverPolicy() {
        // bob (the receiver) accepts all; alice (the owner) would accept none.
        let e = evaluator(alice: Policy(receiveData: .none))
        #expect(e.canReceiveSharedFile(fileOwner: alice, receiver: bob) == true)
        #expect(e.canReceiveSharedFile(fileOwner: personal, receiver: bob) == true)
    }

    // MARK: isSaveToAllowed

    @Test("save uses the data owner's policy", arguments: SaveLocation.allCases)
    func saveOwnerPolicy(location: SaveLocation) {
        let allowed: Set<SaveLocation> = [.oneDriveForBusiness, .sharePoint, .accountDocument]
        let e = evaluator(alice: Policy(saveToLocations: allowed))
        #expect(e.isSaveToAllowed(location: location, dataOwner: alice) == allowed.contains(location))
        // bob (another managed account) has all locations; unmanaged owners are unrestricted.
        #expect(e.isSaveToAllowed(location: location, dataOwner: bob) == true)
        #expect(e.isSaveToAllowed(location: location, dataOwner: personal) == true)
        #expect(e.isSaveToAllowed(location: location, dataOwner: "") == true)
    }

    @Test("an empty save list denies every location to a managed owner")
    func saveNothing() {
        let e = evaluator(alice: Policy(saveToLocations: []))
        for location in SaveLocation.allCases {
            #expect(e.isSaveToAllowed(location: location, dataOwner: alice) == false)
        }
    }

    // MARK: isOpenFromAllowed

    @Test("open uses the receiving account's policy", arguments: OpenLocation.allCases)
    func openReceiverPolicy(location: OpenLocation) {
        let allowed: Set<OpenLocation> = [.camera, .localStorage, .accountDocument]
        let e = evaluator(alice: Policy(openFromLocations: allowed))
        #expect(e.isOpenFromAllowed(location: location, receiver: alice) == allowed.contains(location))
        #expect(e.isOpenFromAllowed(location: location, receiver: bob) == true)
        #expect(e.isOpenFromAllowed(location: location, receiver: personal) == true)
        #expect(e.isOpenFromAllowed(location: location, receiver: "") == true)
    }

    @Test("an empty open list denies every location to a managed receiver")
    func openNothing() {
        let e = evaluator(alice: Policy(openFromLocations: []))
        for location in OpenLocation.allCases {
            #expect(e.isOpenFromAllowed(location: location, receiver: alice) == false)
        }
    }

    @Test("the lookup sees policy changes without rebuilding the evaluator")
    func liveLookup() {
        let store = PolicyBox(Policy(fileEncryptionRequired: false))
        let e = PolicyEvaluator(lookup: { id in id == alice ? store.value : nil })
        #expect(e.isFileEncryptionRequired(accountId: alice) == false)
        store.value = Policy(fileEncryptionRequired: true)
        #expect(e.isFileEncryptionRequired(accountId: alice) == true)
        store.value = nil  // unenrolled
        #expect(e.isFileEncryptionRequired(accountId: alice) == false)
        #expect(e.canReceiveSharedFile(fileOwner: nil, receiver: alice) == true)
    }
}

/// A lock-protected mutable policy, standing in for the state database in `liveLookup`.
private final class PolicyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Policy?
    init(_ policy: Policy?) { stored = policy }
    var value: Policy? {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); defer { lock.unlock() }; stored = newValue }
    }
}
