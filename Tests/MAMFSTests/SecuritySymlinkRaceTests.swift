import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// A user racing the daemon through an `allow_other` mount run by root: between the moment the
/// daemon looks at a name and the moment it acts on it, the user swaps a directory for a
/// symlink. The daemon must act on what it looked at (descriptors, no symlink followed), so
/// nothing outside the user's reach changes however the race falls.
@Suite("Security: symlinks swapped in while the daemon works on a name")
struct SecuritySymlinkRaceTests {
    static let seconds = 12

    /// Runs `script` (python, argv after it: `arguments`) as user nobody for up to `seconds`.
    static func asNobody(_ script: String, _ arguments: [String]) -> String {
        "setpriv --reuid=65534 --regid=65534 --clear-groups timeout \(seconds + 20) /usr/bin/python3 -c \(shellQuote(script)) "
            + arguments.map(shellQuote).joined(separator: " ")
    }

    /// nobody changes the owner of its directory `bobd` again and again while it swaps empty
    /// directories below it for symlinks to root's directory `victim` (0700) in the backing
    /// directory. Were one followed, root's encrypted file there would be declassified.
    static let ownerChangeRace = """
    import os, sys, threading, time
    d, target, seconds, owner = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    c = os.path.join(d, "x")
    n = 48
    for i in range(n): os.makedirs(os.path.join(c, "s%03d" % i), exist_ok=True)
    stop = False
    def racer(lo, hi):
        while not stop:
            for i in range(lo, hi):
                p = os.path.join(c, "s%03d" % i)
                for f, a in ((os.rmdir, (p,)), (os.symlink, (target, p)), (os.unlink, (p,)), (os.mkdir, (p,))):
                    try: f(*a)
                    except OSError: pass
    threads = [threading.Thread(target=racer, args=(k * n // 4, (k + 1) * n // 4)) for k in range(4)]
    for t in threads: t.start()
    values = [b"", owner.encode()]
    start = time.time(); k = 0
    while time.time() - start < seconds:
        try: os.setxattr(d, "user.mam.owner", values[k % 2])
        except OSError: pass
        k += 1
    stop = True
    for t in threads: t.join()
    print(k)
    """

    @Test("a directory's owner change racing symlink swaps below it never rewrites root's file elsewhere")
    func ownerChangeRaceStaysInTheTree() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            let setUp = try m.sh("""
            chmod 755 "$BASE" && chmod 1777 . && mkdir victim && printf '\(SecurityOwnerChangeTests.marker)' > victim/secret && \
            chmod 600 victim/secret && chmod 700 victim && mkdir bobd && chown nobody:nogroup bobd
            """)
            try #require(setUp.status == 0, "\(setUp.err)")
            let race = try m.sh(SecuritySymlinkRaceTests.asNobody(SecuritySymlinkRaceTests.ownerChangeRace,
                                                                   ["bobd", m.backing + "/victim", "\(SecuritySymlinkRaceTests.seconds)",
                                                                    MountedFixture.account]), timeout: 120)
            #expect(race.status == 0, "\(race.err)")
            #expect((Int(race.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 10, "owner changes made: \(race.out)")
            let header = try m.backingHeader("victim/secret")
            #expect(header?.owner == MountedFixture.account)
            #expect(header?.isEncrypted == true)
            let stored = SecurityOwnerChangeTests.backingBytes(m, "victim/secret")
            #expect(stored.range(of: Data(SecurityOwnerChangeTests.marker.utf8)) == nil, "plaintext of root's file on the backing disk")
        }
    }

    /// nobody sets the times of its symlink `bobu/x/victim` again and again while it swaps
    /// `x` for a symlink to root's directory outside the mount, which holds a file `victim`.
    static let symlinkTimesRace = """
    import os, sys, threading, time
    d, outside, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(os.path.join(d, "x"), exist_ok=True)
    os.symlink("anything", os.path.join(d, "x", "victim"))
    stop = False
    def racer():
        x, xr = os.path.join(d, "x"), os.path.join(d, "xr")
        while not stop:
            for f, a in ((os.rename, (x, xr)), (os.symlink, (outside, x)), (os.unlink, (x,)), (os.rename, (xr, x))):
                try: f(*a)
                except OSError: pass
    t = threading.Thread(target=racer); t.start()
    start = time.time(); k = 0
    while time.time() - start < seconds:
        for p in (os.path.join(d, "x", "victim"), os.path.join(d, "xr", "victim")):
            try: os.utime(p, (946684800, 946684800), follow_symlinks=False); k += 1
            except OSError: pass
    stop = True; t.join()
    print(k)
    """

    @Test("a symlink's times set racing a swap of its directory never touch a file outside the mount")
    func symlinkTimesRaceStaysInTheMount() throws {
        try withMount(.unmanaged, options: ["allow_other"]) { m in
            let outside = m.base + "/rootdir"
            let setUp = try m.sh("""
            chmod 755 "$BASE" && chmod 1777 . && mkdir -p \(shellQuote(outside)) && echo data > \(shellQuote(outside))/victim && \
            touch -d 2020-01-01 \(shellQuote(outside))/victim && chmod 700 \(shellQuote(outside)) && mkdir bobu && chown nobody:nogroup bobu
            """)
            try #require(setUp.status == 0, "\(setUp.err)")
            var before = stat()
            try #require(stat(outside + "/victim", &before) == 0)
            let race = try m.sh(SecuritySymlinkRaceTests.asNobody(SecuritySymlinkRaceTests.symlinkTimesRace,
                                                                   ["bobu", outside, "\(SecuritySymlinkRaceTests.seconds)"]), timeout: 120)
            #expect(race.status == 0, "\(race.err)")
            #expect((Int(race.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 10, "times set: \(race.out)")
            var after = stat()
            try #require(stat(outside + "/victim", &after) == 0)
            #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec, "root's file outside the mount got nobody's time")
        }
    }
}
