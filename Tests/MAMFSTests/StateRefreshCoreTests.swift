import Foundation
import Glibc
import Synchronization
import Testing
@testable import MAMFS
@testable import MAMProtection

/// What a running mount does when another process changes the state: requests that arrive
/// while one of them brings the mount up to date wait for it.
@Suite("State refresh in the core")
struct StateRefreshCoreTests {
    @Test("a request that arrives while another derives from the reloaded state waits for it: after a wipe, no open of the wiped owner's file reads it")
    func requestsWaitForTheRefreshInProgress() throws {
        let f = try OverlayCoreFixture()
        let plaintext = Array("work secret".utf8)
        let created = try f.request { try f.fs.create(parent: f.root, name: "work.txt", mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        _ = try plaintext.withUnsafeBytes { try f.fs.write(created.handle, $0, offset: 0, writepage: false, caller: f.caller) }
        f.fs.release(created.handle, caller: f.caller)
        let nodeid = created.entry.nodeid
        // A read before the wipe: the entry keeps the file key.
        let before = try f.request { try f.fs.open(nodeid, flags: O_RDONLY, caller: f.caller) }
        #expect(try f.read(before) == plaintext)
        f.fs.release(before, caller: f.caller)

        // The first refresh after the wipe stops right after the context reloaded.
        let inWindow = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let stops = Atomic<Int>(0)
        f.fs.stateReloaded = {
            guard stops.add(1, ordering: .relaxed).oldValue == 0 else { return }
            inWindow.signal()
            proceed.wait()
        }
        let cli = try ProtectionContext.open(stateDirectory: StateDirectory(path: f.base + "/state"), passphraseFile: nil)
        try cli.enrollment.wipe(OverlayCoreFixture.account, roots: [])

        let fs = f.fs
        let results = Mutex<[String: Int32]>([:])
        let done = DispatchGroup()
        func openAndRead(_ name: String) {
            done.enter()
            Thread {
                defer { done.leave() }
                var code: Int32 = 0
                let caller = Caller(uid: 0, gid: 0, pid: getpid())
                do {
                    try DescriptorCache.withPins {
                        let handle = try fs.open(nodeid, flags: O_RDONLY, caller: caller)
                        defer { fs.release(handle, caller: caller) }
                        _ = try fs.read(handle, size: 64, offset: 0, caller: caller) { $0.count }
                    }
                } catch {
                    code = fs.errnoCode(error, nil)
                }
                results.withLock { $0[name] = code }
            }.start()
        }
        openAndRead("first")
        #expect(inWindow.wait(timeout: .now() + 20) == .success, "the first open reloads the state")
        openAndRead("second")
        // Time for the second open to finish, had it not waited.
        usleep(300_000)
        proceed.signal()
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(results.withLock { $0 } == ["first": EACCES, "second": EACCES])
    }

    @Test("after a wipe a handle opened before it cannot truncate the wiped owner's file, as it cannot read or write it: EACCES, the backing file unchanged")
    func handleOpenedBeforeAWipeCannotTruncate() throws {
        let f = try OverlayCoreFixture()
        let plaintext = [UInt8](repeating: 0x5A, count: 10_000)
        let created = try f.request { try f.fs.create(parent: f.root, name: "kept.txt", mode: 0o644, flags: O_CREAT | O_RDWR, caller: f.caller) }
        let handle = created.handle
        defer { f.fs.release(handle, caller: f.caller) }
        _ = try plaintext.withUnsafeBytes { bytes in try f.request { try f.fs.write(handle, bytes, offset: 0, writepage: false, caller: f.caller) } }
        #expect(try f.read(handle) == plaintext)
        let storedBefore = try f.backingBytes("kept.txt")
        let cli = try ProtectionContext.open(stateDirectory: StateDirectory(path: f.base + "/state"), passphraseFile: nil)
        try cli.enrollment.wipe(OverlayCoreFixture.account, roots: [])
        f.fs.refresh(force: true)
        var shorter = AttributeChanges()
        shorter.size = 100
        #expect(f.errno { _ = try f.request { try f.fs.setattr(created.entry.nodeid, shorter, handle: handle, caller: f.caller) } } == EACCES)
        #expect(f.errno { _ = try f.read(handle) } == EACCES)
        #expect(f.errno {
            _ = try [UInt8](repeating: 1, count: 10).withUnsafeBytes { bytes in
                try f.request { try f.fs.write(handle, bytes, offset: 0, writepage: false, caller: f.caller) }
            }
        } == EACCES)
        #expect(try f.backingBytes("kept.txt") == storedBefore, "a request through the old handle changed the wiped owner's file")
    }
}
