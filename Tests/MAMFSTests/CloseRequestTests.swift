import Foundation
import Testing
import MAMTestSupport

/// What a close costs: a read-only handle closes without a FLUSH round trip (FOPEN_NOFLUSH);
/// a writable one still sends it, so close reports what the kernel's flush finds.
@Suite("Close without FLUSH for read-only handles")
struct CloseRequestTests {
    @Test("closing read-only handles sends no FLUSH, closing a writable one sends one, and every byte is read and written",
          .enabled(if: FuseRequestTrace.isAvailable, "needs root and the fuse_request_send tracepoint (kernel 6.14+)"),
          arguments: MountedFixture.Kind.allCases)
    func readOnlyCloseSendsNoFlush(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            #expect(try m.sh("printf 'first line\\n' > f").status == 0)
            let r = try FuseRequestTrace.count(m, while: """
            set -e
            cat f; cat f
            python3 -c 'f = open("f", "a"); f.write("second line\\n"); f.close()'
            cat f
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "first line\nfirst line\nfirst line\nsecond line\n", "\(r.out)")
            #expect(r.requests["FUSE_OPEN"] == 4, "\(r.requests)")
            #expect(r.requests["FUSE_FLUSH"] == 1, "only the writable handle's close flushes: \(r.requests)")
        }
    }
}
