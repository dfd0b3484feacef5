import Foundation
import Glibc
import MAMTestSupport

extension MountedFixture {
    /// Runs `script` with bash as user nobody (uid and gid 65534, no groups), for tests of a
    /// mount a user runs (no allow_other, so no default_permissions). The script gets a fresh
    /// directory owned by nobody as $1 (`D`), the mamfs binary as $2 (`M`) and the fixture's
    /// account as $3 (`A`); it makes, mounts and unmounts its own mount at "$D/m". A mount it
    /// leaves behind is unmounted afterwards; then `after` runs as root with $D set (to check
    /// the backing bytes), and the directory is removed. The result's status is the script's.
    ///
    /// /dev/fuse is often 0600 in containers: it is opened to others for the run and put back.
    /// Runs in every test process (the shards of `make test`) take turns, so one never puts
    /// the mode back while another's mount still needs it: each holds an exclusive flock of the
    /// test bundle's executable, the one file all of them share.
    func shAsNobody(_ script: String, after: String = "") throws -> ProcessResult {
        let turn = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        guard turn >= 0 else { throw TestSupportError("cannot open the test bundle to take a turn") }
        defer { Glibc.close(turn) }
        while flock(turn, LOCK_EX) != 0 {
            guard errno == EINTR else { throw TestSupportError("flock of the test bundle failed (errno \(errno))") }
        }
        var fuseDevice = stat()
        guard stat("/dev/fuse", &fuseDevice) == 0, chmod("/dev/fuse", 0o666) == 0 else {
            throw TestSupportError("/dev/fuse cannot be opened to user nobody")
        }
        defer { chmod("/dev/fuse", fuseDevice.st_mode & 0o7777) }
        return try sh("""
        D=$(mktemp -d /tmp/mamfs-nobody-XXXXXX) && chmod 755 "$D" && chown 65534:65534 "$D" && cat > "$D/t.sh" <<'SCRIPT'
        \(script)
        SCRIPT
        chmod 755 "$D/t.sh" && setpriv --reuid=65534 --regid=65534 --clear-groups bash "$D/t.sh" "$D" "$MAMFS" "$ACCT"; rc=$?
        mountpoint -q "$D/m" && { fusermount3 -u "$D/m" || fusermount3 -uz "$D/m"; }
        \(after)
        rm -rf "$D"; exit $rc
        """)
    }
}
