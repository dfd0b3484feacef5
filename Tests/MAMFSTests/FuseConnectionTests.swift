import Foundation
import Glibc
import Testing
import MAMProtection
@testable import MAMFS
import MAMTestSupport

/// Which processes serve a FUSE connection (`FuseConnection.holders`), which `mamfs mount` and
/// `mamfs unmount` use to tell a live mount from a dead one.
@Suite("FuseConnection")
struct FuseConnectionTests {
    /// The kernel hands a connection's number to the next mount as soon as the mount goes. A
    /// daemon stopped (or slow to exit) after its mount went still names that number in its
    /// fdinfo; it was counted as the new mount's daemon, so `mamfs mount` called a dead mount
    /// that got the number "already mounted".
    @Test("a daemon whose mount went (stopped, still holding its /dev/fuse descriptor) is not a holder of the number any more; a live one is")
    func daemonOfAGoneMount() throws {
        let m = try MountedFixture(.unmanaged)
        defer { m.close() }
        guard let daemon = m.daemonPID else { return }  // in-process mount: no daemon process
        let entry = MountInfo.current()?.entries.last { $0.mountPoint == m.mountpoint }
        let connection = try #require(entry?.minorDevice)
        #expect(FuseConnection.holders(of: connection) == [daemon])

        #expect(kill(daemon, SIGSTOP) == 0)
        defer { kill(daemon, SIGCONT) }
        let unmount = try shell("fusermount3 -u \(shellQuote(m.mountpoint))")
        #expect(unmount.status == 0, "\(unmount.err)")
        #expect(!m.isMounted)
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon)/fd")) ?? []
        let stillHeld = descriptors.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon)/fd/\($0)")) == "/dev/fuse" }
        #expect(stillHeld, "the stopped daemon keeps its descriptor")
        // The stopped daemon is not a holder. Another test's mount may hold the number already
        // (the kernel hands it on as soon as this mount goes), so only this daemon is checked.
        #expect(!FuseConnection.holders(of: connection).contains(daemon))
        #expect(MountpointState.of(m.mountpoint) == .notMounted)
    }
}
