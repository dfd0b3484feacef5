import Foundation
import Testing
import MAMTestSupport

/// Write-only handles are opened with direct I/O (`OverlayFilesystem.directIO`): no request
/// for `security.capability` before their first write, and still coherent with the page cache
/// of read-write handles and shared maps of the same file.
@Suite("Write-only handles")
struct WriteOnlyHandleTests {
    /// tracefs with the fuse:fuse_request_send tracepoint (kernel 6.14 and later), as root.
    static var canTrace: Bool {
        geteuid() == 0 && (FileManager.default.fileExists(atPath: "/sys/kernel/tracing/events/fuse/fuse_request_send")
            || (try? shell("mount -t tracefs nodev /sys/kernel/tracing"))?.status == 0
               && FileManager.default.fileExists(atPath: "/sys/kernel/tracing/events/fuse/fuse_request_send"))
    }

    @Test("A new file written through a write-only descriptor costs no GETXATTR; through a read-write one it costs one",
          .enabled(if: canTrace, "needs root and the fuse:fuse_request_send tracepoint (tracefs, Linux 6.14+)"),
          arguments: MountedFixture.Kind.allCases)
    func firstWriteAsksNothing(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            // A private tracing instance (its own buffer and enable switches), filtered to this
            // mount's FUSE connection: the kernel's dev_t, major << 20 | minor.
            let r = try m.sh("""
            I=/sys/kernel/tracing/instances/mamfs-wo-$$ && mkdir "$I" && trap 'rmdir "$I"' EXIT && \
            C=$(( $(stat -c %Hd .) << 20 | $(stat -c %Ld .) )) && E="$I/events/fuse/fuse_request_send" && \
            echo "connection == $C" > "$E/filter" && \
            count() { echo 1 > "$E/enable"; "$@"; rc=$?; echo 0 > "$E/enable"; \
                      printf '%s %s %s\\n' "$rc" "$(grep -c FUSE_GETXATTR "$I/trace")" "$(grep -c FUSE_WRITE "$I/trace")"; \
                      echo > "$I/trace"; } && \
            count sh -c 'printf write-only > wo' && \
            count sh -c 'exec 3<> rw && printf read-write >&3' && \
            cat wo rw
            """)
            #expect(r.status == 0, "\(r.err)")
            let lines = r.out.split(separator: "\n").map(String.init)
            // exit status, GETXATTR requests, WRITE requests
            #expect(lines.first == "0 0 1", "write-only: \(r.out)")
            #expect(lines.dropFirst().first == "0 1 1", "read-write (the kernel asks for security.capability): \(r.out)")
            #expect(lines.last == "write-onlyread-write")
        }
    }

    @Test("A write through a write-only descriptor is seen by a read-write descriptor's cached pages and by a shared map",
          arguments: MountedFixture.Kind.allCases)
    func coherentWithCachedPages(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            python3 -c '
            import os, mmap
            with open("f", "wb") as f: f.write(b"A" * 8192)
            rw = os.open("f", os.O_RDWR)
            assert os.pread(rw, 8192, 0) == b"A" * 8192
            m = mmap.mmap(rw, 8192, mmap.MAP_SHARED)
            assert m[:4] == b"AAAA"
            wo = os.open("f", os.O_WRONLY)
            os.pwrite(wo, b"BBBB", 100)
            print(os.pread(rw, 8, 98).decode(), m[98:106].decode())
            m[0:2] = b"MM"
            os.pwrite(wo, b"CC", 10)
            print(os.pread(rw, 12, 0).decode(), m[0:12].decode())
            wa = os.open("f", os.O_WRONLY | os.O_APPEND)
            os.write(wa, b"Z")
            print(os.fstat(rw).st_size, os.pread(rw, 2, 8191).decode())
            for fd in (wo, wa): os.close(fd)
            m.close(); os.close(rw)
            ' && head -c 12 f && echo && tail -c 2 f && echo && stat -c %s f
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "AABBBBAA AABBBBAA\nMMAAAAAAAACC MMAAAAAAAACC\n8193 AZ\nMMAAAAAAAACC\nAZ\n8193\n")
            if kind == .managed {
                #expect(try m.backingHeader("f")?.isEncrypted == true)
            }
        }
    }
}
