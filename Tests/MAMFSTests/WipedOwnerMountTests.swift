import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// After a selective wipe, handles opened before it stop working and nothing new is stored
/// with the wiped owner (through a real mount, with the CLI's `mamfs wipe`).
@Suite("Wiped owner: open handles and new files")
struct WipedOwnerMountTests {
    /// A python3 program: opens `work.txt` (read) and `other.txt` (read-write) in the mount,
    /// reads once, writes "ready" to $BASE/ready, waits for $BASE/go, then tries read, write,
    /// fsync and fallocate on the old handles and prints each result ("ok" or the errno name).
    static let holder = #"""
    import errno, os, sys, time
    base = os.environ["BASE"]
    reader = os.open("work.txt", os.O_RDONLY)
    writer = os.open("other.txt", os.O_RDWR)
    print("before", os.pread(reader, 64, 0).decode())
    open(base + "/ready", "w").close()
    while not os.path.exists(base + "/go"):
        time.sleep(0.02)
    def attempt(name, call):
        try:
            call()
            print(name, "ok")
        except OSError as e:
            print(name, errno.errorcode[e.errno])
    attempt("read", lambda: os.pread(reader, 64, 0))
    attempt("write", lambda: os.pwrite(writer, b"more", 0))
    attempt("fsync", lambda: os.fsync(writer))
    attempt("fallocate", lambda: os.posix_fallocate(writer, 0, 8192))
    """#

    @Test("handles opened before the wipe fail with EACCES; creates that would get the wiped owner are refused")
    func wipeStopsOpenHandlesAndNewFiles() throws {
        try withMount(.managed) { m in
            try Data(WipedOwnerMountTests.holder.utf8).write(to: URL(fileURLWithPath: m.base + "/holder.py"))
            let r = try m.sh("""
            printf 'work-secret' > work.txt && printf 'other' > other.txt && mkdir d && \
            setfattr -n user.mam.owner -v "$ACCT" d && printf 'mine' > d/personal && \
            setfattr -n user.mam.owner -v '' d/personal && \
            { python3 "$BASE/holder.py" > "$BASE/holder.out" 2>&1 & } && holder=$! && \
            for i in $(seq 100); do [ -e "$BASE/ready" ] && break; sleep 0.05; done && \
            "$MAMFS" wipe "$ACCT" --state "$S" > /dev/null && sleep 0.3 && touch "$BASE/go" && wait $holder; \
            cat "$BASE/holder.out"
            """)
            #expect(r.status == 0, "\(r.out) \(r.err)")
            #expect(r.out == "before work-secret\nread EACCES\nwrite EACCES\nfsync EACCES\nfallocate EACCES\n", "\(r.out) \(r.err)")
            // New files whose owner would be the wiped account: at the root (the mount's
            // account) and in the directory that was the account's (its tag is gone now).
            let create = try m.sh("""
            touch new 2>&1; echo "touch=$?"; \
            python3 -c 'import errno, os
            try:
                os.open("d/new", os.O_CREAT | os.O_WRONLY, 0o644); print("ok")
            except OSError as e:
                print(errno.errorcode[e.errno])'
            """)
            #expect(create.out.contains("Permission denied"), "\(create.out)")
            #expect(create.out.hasSuffix("touch=1\nEACCES\n"), "\(create.out)")
            #expect(!FileManager.default.fileExists(atPath: m.backing + "/new"))
            #expect(!FileManager.default.fileExists(atPath: m.backing + "/d/new"))
            // The personal file stays readable.
            let personal = try m.sh("cat d/personal")
            #expect(personal.out == "mine", "\(personal.err)")
        }
    }
}
