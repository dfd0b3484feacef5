import Foundation
import Glibc
@testable import MAMFS
@testable import MAMProtection
import Synchronization
import Testing

/// The session lock in the overlay's core, without a kernel: the order of a lock's steps and
/// locks and unlocks that overlap.
@Suite("Session lock in the overlay core: ordering of a lock, overlapping lock and unlock")
struct SessionLockCoreTests {
    static var completePolicy: Policy {
        var policy = Policy.demoEncrypting
        policy.fileProtectionLevel = .complete
        return policy
    }

    @Test("a lock drops the kernel's pages of a file once more after the file is closed, so no read that raced the lock leaves plaintext in the page cache")
    func lastInvalidationAfterTheFilesAreClosed() throws {
        let f = try OverlayCoreFixture(policy: Self.completePolicy)
        let created = try f.request { try f.fs.create(parent: f.root, name: "w.txt", mode: 0o600, flags: O_RDWR, caller: f.caller) }
        _ = try Array("secret".utf8).withUnsafeBytes { bytes in
            try f.request { try f.fs.write(created.handle, bytes, offset: 0, writepage: false, caller: f.caller) }
        }
        let nodeid = created.entry.nodeid
        let closedAtInvalidation = Mutex<[Bool]>([])
        f.fs.contentInvalidated = { [fs = f.fs] id in
            guard id == nodeid else { return }
            closedAtInvalidation.withLock { $0.append(fs.isWithheld(owner: OverlayCoreFixture.account)) }
        }
        f.fs.sessionLocked(source: "test")
        let seen = closedAtInvalidation.withLock { $0 }
        #expect(seen.first == false, "dirty pages are written back while the keys are there: \(seen)")
        #expect(seen.last == true, "the last invalidation comes after the file is closed: \(seen)")
        #expect(f.errno { _ = try f.read(created.handle) } == EACCES)
        f.fs.release(created.handle, caller: f.caller)
    }

    @Test("a lock that arrives while an unlock derives the master key from the passphrase runs after it: the keys end withheld")
    func lockDuringUnlockIsNotLost() throws {
        let f = try OverlayCoreFixture(policy: Self.completePolicy, passphrase: "correct horse")
        f.fs.sessionLocked(source: "test")
        #expect(f.fs.withheldAccounts == [OverlayCoreFixture.account])
        let unlocked = DispatchSemaphore(value: 0)
        let result = Mutex<String>("")
        let fs = f.fs
        Thread {
            do {
                let restored = try Array("correct horse".utf8).withUnsafeBytes { try fs.sessionUnlocked(source: "test", passphrase: $0) }
                result.withLock { $0 = "restored \(restored.count)" }
            } catch {
                result.withLock { $0 = "\(error)" }
            }
            unlocked.signal()
        }.start()
        // scrypt takes hundreds of milliseconds: the lock comes in the middle of it.
        usleep(100_000)
        f.fs.sessionLocked(source: "test")
        unlocked.wait()
        #expect(result.withLock { $0 } == "restored 1")
        #expect(f.fs.withheldAccounts == [OverlayCoreFixture.account], "the lock after the unlock holds")
        #expect(!f.context.holdsMasterKey)
    }
}
