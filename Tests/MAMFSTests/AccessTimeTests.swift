import Foundation
import Testing
import MAMTestSupport

/// Access times of backing files: write(2) never changes a file's access time, so the
/// daemon's own reads for a write-only handle or a truncate by name (the header, the stored
/// block an unaligned write or a new end merges into) must not change it either; a caller's
/// read does (relatime).
@Suite("Access times through the mount")
struct AccessTimeTests {
    @Test("unaligned writes through write-only handles and truncate by name leave the access time; a read through the mount updates it",
          arguments: MountedFixture.Kind.allCases)
    func writeOnlyHandlesLeaveTheAccessTime(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            python3 - <<'EOF'
            import os
            M, B = os.environ["M"], os.environ["B"]
            OLD = 946684800  # 2000-01-01: older than any mtime, so relatime would update it
            def atimes(name):
                return int(os.stat(os.path.join(B, name)).st_atime), int(os.stat(os.path.join(M, name)).st_atime)
            # An existing file, opened write-only and appended to in pieces that end inside blocks.
            with open(os.path.join(M, "existing"), "wb") as f:
                f.write(b"x" * 1000)
            os.utime(os.path.join(M, "existing"), (OLD, OLD + 10))
            fd = os.open(os.path.join(M, "existing"), os.O_WRONLY | os.O_APPEND)
            for i in range(3):
                os.write(fd, b"y" * 512)
            os.close(fd)
            print("existing", atimes("existing"))
            # truncate(2) by name to a size inside a block (the new last block is read and sealed again).
            os.utime(os.path.join(M, "existing"), (OLD, OLD + 10))
            os.truncate(os.path.join(M, "existing"), 1500)
            print("truncated", atimes("existing"), os.stat(os.path.join(M, "existing")).st_size)
            # A file created write-only: its access time set through the handle, then more writes.
            fd = os.open(os.path.join(M, "created"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"z" * 700)
            os.utime(fd, (OLD, OLD + 10))
            os.write(fd, b"z" * 700)
            os.pwrite(fd, b"w" * 10, 100)
            os.close(fd)
            print("created", atimes("created"))
            # The control: a read through the mount is a read of the file.
            with open(os.path.join(M, "created"), "rb") as f:
                data = f.read()
            print("read", len(data), data[:1], data[100:101], atimes("created")[0] > OLD)
            EOF
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == """
            existing (946684800, 946684800)
            truncated (946684800, 946684800) 1500
            created (946684800, 946684800)
            read 1400 b'z' b'w' True

            """, "\(r.out)")
        }
    }
}
