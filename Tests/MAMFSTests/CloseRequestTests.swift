import Foundation
import Testing
import MAMTestSupport

/// What a close costs: mamfs has no FLUSH handler, so the first FLUSH of a mount is answered
/// ENOSYS and the kernel sends none after it; read-only handles never send one
/// (FOPEN_NOFLUSH). The kernel's own work at close stays: it writes back a shared map's dirty
/// pages before the close returns.
@Suite("Close without FLUSH")
struct CloseRequestTests {
    @Test("closes send no FLUSH once the first was refused, and every byte written, by write or through a shared map, is stored when the close returns",
          .enabled(if: FuseRequestTrace.isAvailable, "needs root and the fuse_request_send tracepoint (kernel 6.14+)"),
          arguments: MountedFixture.Kind.allCases)
    func closeSendsNoFlush(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            // This close sends the mount's one FLUSH, which libfuse answers ENOSYS.
            #expect(try m.sh("printf 'first line\\n' > f").status == 0)
            let r = try FuseRequestTrace.count(m, while: #"""
            set -e
            cat f; cat f
            python3 -c 'f = open("f", "a"); f.write("second line\n"); f.close()'
            printf 'third line\n' >> f
            before=$(sha256sum < "$B/f")
            # Stores through a shared map, then unmap and close (Python's map holds its own
            # descriptor): the close writes the dirty page back before it returns, so the
            # backing file has changed before anything opens the file again.
            python3 -c '
            import mmap
            f = open("f", "r+b")
            m = mmap.mmap(f.fileno(), 0)
            f.close()
            m[0:5] = b"FIRST"
            m.close()'
            after=$(sha256sum < "$B/f")
            [ "$before" != "$after" ] || echo "the backing file did not change at the close"
            cat f
            """#)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "first line\nfirst line\nFIRST line\nsecond line\nthird line\n", "\(r.out)")
            #expect(r.requests["FUSE_OPEN"] == 6, "\(r.requests)")
            #expect(r.requests["FUSE_FLUSH", default: 0] == 0, "no close after the first sends a FLUSH: \(r.requests)")
            #expect(r.requests["FUSE_WRITE", default: 0] >= 3, "the appends and the map's page: \(r.requests)")
        }
    }
}
