import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// The file-protection levels on a real mount (policy key `fileProtectionLevel`): what a lock
/// closes, what it leaves open, what an unlock gives back, and that the keys really leave the
/// daemon's memory. The lock comes from `mamfs lock|unlock` here; SessionLockBusMountTests
/// sends it from logind and the screensaver.
@Suite("Session lock on a mount: fileProtectionLevel, mamfs lock and unlock")
struct SessionLockMountTests {
    static func policy(_ level: String) -> String {
        #"{"fileEncryptionRequired": true, "fileProviderEncryptFiles": true, "fileProtectionLevel": "\#(level)"}"#
    }

    /// A managed mount whose account has `level`, with work.txt (the account's, encrypted) and
    /// pers/mine.txt (unmanaged) written through it.
    static func mount(_ level: String, environment: [String: String] = [:]) throws -> MountedFixture {
        let m = try MountedFixture(.managed, mountEnvironment: environment, policy: policy(level))
        if level == "untilFirstUserAuth" { return m }
        let setup = try m.sh(#"printf 'work-secret' > work.txt && mkdir pers && setfattr -n user.mam.owner -v '' pers && printf 'personal' > pers/mine.txt"#)
        guard setup.status == 0 else { throw TestSupportError("setup: \(setup.err)") }
        return m
    }

    static func log(_ m: MountedFixture) -> String { (try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "" }

    @Test("complete: mamfs lock closes the account's files (open, read through a handle opened before, create: EACCES) and leaves personal files open; mamfs unlock gives the same bytes back")
    func completeLockAndUnlock() throws {
        let m = try Self.mount("complete")
        defer { m.close() }
        let locked = try m.sh(#"""
        exec 3<work.txt
        "$MAMFS" lock "$M" --state "$S"; echo "lock=$?"
        cat work.txt; echo "open=$?"
        cat <&3; echo "held=$?"
        echo new > new.txt; echo "create=$?"
        cat pers/mine.txt; echo " personal=$?"
        echo more > pers/more.txt; echo "personal-create=$?"
        "$MAMFS" unlock "$M" --state "$S"; echo "unlock=$?"
        cat work.txt; echo " open=$?"
        exec 3<&-
        """#)
        #expect(locked.out == """
        \(m.mountpoint): locked; keys withheld: \(MountedFixture.account)
        lock=0
        open=1
        held=1
        create=1
        personal personal=0
        personal-create=0
        \(m.mountpoint): unlocked; keys restored: \(MountedFixture.account)
        unlock=0
        work-secret open=0

        """, "\(locked.out)\n\(locked.err)")
        #expect(locked.err.components(separatedBy: "Permission denied").count - 1 == 3, "\(locked.err)")
        #expect(try m.backingHeader("work.txt")?.isEncrypted == true)
        #expect(FileManager.default.fileExists(atPath: m.backing + "/new.txt") == false, "a refused create makes nothing")
        #expect(Self.log(m).contains("keys of \(MountedFixture.account) dropped: session locked (mamfs lock)"), "\(Self.log(m))")
    }

    @Test("a policy set just before mamfs lock counts: the lock withholds the keys its new fileProtectionLevel drops")
    func lockRightAfterPolicySet() throws {
        let m = try Self.mount("none")
        defer { m.close() }
        let file = m.base + "/policy-complete.json"
        try Data(Self.policy("complete").utf8).write(to: URL(fileURLWithPath: file))
        // The daemon has the old policy in use (a read through the mount), then the new one
        // is committed and the lock follows at once.
        let r = try m.sh(#"""
        cat work.txt; echo " before=$?"
        "$MAMFS" policy set "$ACCT" "$BASE/policy-complete.json" --state "$S" > /dev/null; echo "set=$?"
        "$MAMFS" lock "$M" --state "$S"; echo "lock=$?"
        cat work.txt; echo "locked=$?"
        "$MAMFS" unlock "$M" --state "$S" > /dev/null; echo "unlock=$?"
        cat work.txt; echo " after=$?"
        """#)
        #expect(r.out == """
        work-secret before=0
        set=0
        \(m.mountpoint): locked; keys withheld: \(MountedFixture.account)
        lock=0
        locked=1
        unlock=0
        work-secret after=0

        """, "\(r.out)\n\(r.err)")
    }

    @Test("completeUnlessOpen: a handle opened before the lock goes on reading and writing its file; new opens and creates get EACCES until the unlock")
    func completeUnlessOpenKeepsOpenHandles() throws {
        let m = try Self.mount("completeUnlessOpen")
        defer { m.close() }
        let script = #"""
        import errno, os, subprocess, sys
        M, S, MAMFS = os.environ["M"], os.environ["S"], os.environ["MAMFS"]
        fd = os.open(M + "/work.txt", os.O_RDWR)
        subprocess.run([MAMFS, "lock", M, "--state", S], check=True, stdout=subprocess.DEVNULL)
        print("held-read", os.pread(fd, 11, 0).decode())
        print("held-write", os.pwrite(fd, b"-more", 11))
        for what, call in [("open", lambda: os.open(M + "/work.txt", os.O_RDONLY)),
                           ("create", lambda: os.open(M + "/new.txt", os.O_CREAT | os.O_WRONLY, 0o644))]:
            try:
                call(); print(what, "ok")
            except OSError as e:
                print(what, errno.errorcode[e.errno])
        os.close(fd)
        subprocess.run([MAMFS, "unlock", M, "--state", S], check=True, stdout=subprocess.DEVNULL)
        print("after", open(M + "/work.txt").read())
        """#
        let result = try m.sh("python3 -c \(shellQuote(script))")
        #expect(result.out == "held-read work-secret\nheld-write 5\nopen EACCES\ncreate EACCES\nafter work-secret-more\n",
                "\(result.out)\n\(result.err)")
    }

    /// The environment of a daemon outside any logind session: no system bus, no session id.
    static func noSession(_ dir: TempDirectory) -> [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + dir.file("no-bus"), "XDG_SESSION_ID": ""]
    }

    @Test("untilFirstUserAuth outside a logind session: nothing of the account opens from the mount's start until the first unlock; a later lock changes nothing")
    func untilFirstUserAuth() throws {
        let dir = try TempDirectory(prefix: "mamfs-nosession")
        let m = try Self.mount("untilFirstUserAuth", environment: Self.noSession(dir))
        defer { m.close() }
        let result = try m.sh(#"""
        echo x > first.txt; echo "create=$?"
        "$MAMFS" unlock "$M" --state "$S"; echo "unlock=$?"
        printf 'after-unlock' > first.txt; echo "create=$?"
        "$MAMFS" lock "$M" --state "$S"; echo "lock=$?"
        cat first.txt; echo " read=$?"
        """#)
        #expect(result.out == """
        create=1
        \(m.mountpoint): unlocked; keys restored: \(MountedFixture.account)
        unlock=0
        create=0
        \(m.mountpoint): locked; no account's policy drops its keys on a lock
        lock=0
        after-unlock read=0

        """, "\(result.out)\n\(result.err)")
        #expect(Self.log(m).contains("keys of \(MountedFixture.account) dropped: untilFirstUserAuth"), "\(Self.log(m))")
    }

    @Test("complete: pages written through a shared map before a lock, unmapped while locked, are in the file after the unlock, encrypted")
    func dirtyMappedPagesSurviveTheLock() throws {
        let m = try Self.mount("complete")
        defer { m.close() }
        let script = #"""
        import mmap, os, subprocess
        M, S, MAMFS = os.environ["M"], os.environ["S"], os.environ["MAMFS"]
        with open(M + "/mapped.bin", "wb") as f:
            f.write(b"\0" * 8192)
        fd = os.open(M + "/mapped.bin", os.O_RDWR)
        mem = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        mem[0:12] = b"mapped-bytes"
        mem[4096:4100] = b"tail"
        subprocess.run([MAMFS, "lock", M, "--state", S], check=True, stdout=subprocess.DEVNULL)
        mem.close()
        os.close(fd)
        subprocess.run([MAMFS, "unlock", M, "--state", S], check=True, stdout=subprocess.DEVNULL)
        data = open(M + "/mapped.bin", "rb").read()
        print(data[0:12].decode(), data[4096:4100].decode(), len(data))
        """#
        let result = try m.sh("python3 -c \(shellQuote(script))")
        #expect(result.out == "mapped-bytes tail 8192\n", "\(result.out)\n\(result.err)\n\(Self.log(m))")
        #expect(try m.backingHeader("mapped.bin")?.isEncrypted == true)
    }

    @Test("the master key is in the daemon's memory before a lock and nowhere in it after (as root: /proc/PID/mem scanned)")
    func masterKeyLeavesTheDaemonsMemory() throws {
        guard getuid() == 0 else { return }
        let m = try Self.mount("complete")
        defer { m.close() }
        guard let pid = m.daemonPID else { return }
        let count = #"""
        import re, sys
        pid, key = int(sys.argv[1]), open(sys.argv[2], "rb").read()
        found = 0
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                fields = line.split()
                if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                try:
                    mem.seek(start); found += mem.read(end - start).count(key)
                except OSError:
                    pass
        print(found)
        """#
        let command = "python3 -c \(shellQuote(count)) \(pid) \(shellQuote(m.state + "/master.key"))"
        _ = try m.sh("cat work.txt")
        let before = try shell(command)
        #expect(Int(before.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 1, "present before the lock: \(before.out) \(before.err)")
        try m.mamfs(["lock", m.mountpoint])
        let after = try shell(command)
        #expect(after.out == "0\n", "copies of the master key left after the lock: \(after.out) \(after.err)")
        try m.mamfs(["unlock", m.mountpoint])
        #expect(try m.sh("cat work.txt").out == "work-secret")
    }

    /// A python client of the daemon's control socket: finds its name in /proc/net/unix (the
    /// daemon's pid prefix), sends argv[2] (with \\n for newlines), waits argv[3] seconds before
    /// closing its end, prints the answer.
    static let controlClient = #"""
    import socket, sys, time
    prefix = "@mamfs-control-" + sys.argv[1] + "-"
    names = [l.split()[7] for l in open("/proc/net/unix", errors="replace").read().splitlines()[1:] if len(l.split()) > 7 and l.split()[7].startswith(prefix)]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + names[0][1:])
    try:
        s.sendall(sys.argv[2].encode().replace(b"\\n", b"\n"))
        time.sleep(float(sys.argv[3]))
        s.shutdown(socket.SHUT_WR)
    except BrokenPipeError:
        pass  # refused before the request was read: the answer is there all the same
    print(s.recv(4096).decode().strip())
    """#

    static var otherUser: [String]? {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return nil }
        return ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    }

    @Test("the daemon's control socket serves only its own user or root: another uid gets 77, the keys stay, and a flood of refusals is one log line")
    func controlSocketRefusesOtherUsers() throws {
        guard let asOther = Self.otherUser else { return }
        let m = try Self.mount("complete")
        defer { m.close() }
        guard let pid = m.daemonPID else { return }
        let command = (asOther + ["/usr/bin/python3", "-c", Self.controlClient, String(pid), "lock\\n", "0"]).map(shellQuote).joined(separator: " ")
        let result = try shell(command)
        #expect(result.out == "77\tonly the mount's own user or root may lock or unlock it\n", "\(result.out) \(result.err)")
        let flood = try shell("for i in $(seq 30); do \(command) >/dev/null; done")
        #expect(flood.status == 0, "\(flood.err)")
        #expect(try m.sh("cat work.txt").out == "work-secret", "nothing was locked")
        let refusals = Self.log(m).components(separatedBy: "control request from uid 65534").count - 1
        #expect(refusals == 1, "31 refusals, one log line a minute: \(Self.log(m))")
    }

    @Test("a socket another user bound under the daemon's name prefix is not taken for the daemon's, and a socket name that is not UTF-8 hides nothing: mamfs lock reaches the daemon")
    func lookAlikeSocketIgnored() throws {
        guard let asOther = Self.otherUser else { return }
        let m = try Self.mount("complete")
        defer { m.close() }
        guard let pid = m.daemonPID else { return }
        let squatter = #"""
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0mamfs-control-" + sys.argv[1] + "-0000000000000000"); s.listen(1)
        # A name that is not UTF-8 in the namespace's socket table must not hide the daemon's.
        odd = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        odd.bind(b"\0\xff\xfe-not-utf8"); odd.listen(1)
        print("bound", flush=True)
        s.accept()
        print("a client came", flush=True)
        """#
        let process = try BackgroundProcess(asOther[0], Array(asOther.dropFirst()) + ["/usr/bin/python3", "-c", squatter, String(pid)],
                                            environment: testEnvironment())
        defer { process.stop() }
        guard process.wait(until: { $0.out.contains("bound") }) else { throw TestSupportError("squatter: \(process.err)") }
        let result = try m.sh(#""$MAMFS" lock "$M" --state "$S"; echo "lock=$?"; cat work.txt; echo "read=$?""#)
        #expect(result.out == "\(m.mountpoint): locked; keys withheld: \(MountedFixture.account)\nlock=0\nread=1\n", "\(result.out) \(result.err)")
        #expect(!process.out.contains("a client came"))
    }

    @Test("connections kept open without a request hold up no lock: mamfs lock is answered while they still wait for their answer")
    func idleConnectionsDoNotBlockLocks() throws {
        let m = try Self.mount("complete")
        defer { m.close() }
        guard let pid = m.daemonPID, FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return }
        let script = #"""
        import socket, subprocess, sys, os
        pid, M, S, MAMFS = sys.argv[1], os.environ["M"], os.environ["S"], os.environ["MAMFS"]
        prefix = "@mamfs-control-" + pid + "-"
        name = [l.split()[7] for l in open("/proc/net/unix", errors="replace").read().splitlines()[1:] if len(l.split()) > 7 and l.split()[7].startswith(prefix)][0]
        idle = []
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect("\0" + name[1:]); idle.append(s)
        lock = subprocess.run([MAMFS, "lock", M, "--state", S], capture_output=True, text=True)
        print("lock", lock.returncode)
        for s in idle:
            s.setblocking(False)
            try:
                print("idle answered", s.recv(100) != b"")
            except BlockingIOError:
                print("idle waiting")
        """#
        let result = try m.sh("python3 -c \(shellQuote(script)) \(pid)")
        #expect(result.out == "lock 0\nidle waiting\nidle waiting\nidle waiting\n", "\(result.out) \(result.err)")
        #expect(try m.sh("cat work.txt").status != 0)
    }

    @Test("while locked, a plain file of the account can be neither truncated without a handle nor re-owned (it would be readable), nor a directory; a personal file's owner can change")
    func ownerChangeWhileLocked() throws {
        let m = try MountedFixture(.managed, policy: #"{"fileEncryptionRequired": false, "fileProtectionLevel": "complete"}"#)
        defer { m.close() }
        let result = try m.sh(#"""
        printf 'plain-work' > w.txt && mkdir d pers && setfattr -n user.mam.owner -v '' pers && printf 'mine' > pers/p.txt
        "$MAMFS" lock "$M" --state "$S" >/dev/null; echo "lock=$?"
        setfattr -n user.mam.owner -v '' w.txt; echo "declassify=$?"
        setfattr -n user.mam.owner -v "$OTHER" w.txt; echo "reown=$?"
        setfattr -n user.mam.owner -v '' d; echo "directory=$?"
        setfattr -n user.mam.owner -v "$ACCT" pers/p.txt; echo "to-withheld=$?"
        setfattr -n user.mam.owner -v "" pers/p.txt; echo "personal=$?"
        python3 -c 'import os; os.truncate("w.txt", 0)' 2>/dev/null; echo "truncate=$?"
        cat w.txt; echo "read=$?"
        """#)
        #expect(result.out == "lock=0\ndeclassify=1\nreown=1\ndirectory=1\nto-withheld=1\npersonal=0\ntruncate=1\nread=1\n", "\(result.out) \(result.err)")
        #expect(try m.backingHeader("w.txt")?.owner == MountedFixture.account)
        try m.mamfs(["unlock", m.mountpoint])
        #expect(try m.sh("cat w.txt").out == "plain-work")
    }

    @Test("a request naming another mountpoint is refused as not this daemon's (a daemon whose mount is gone can share its connection number with a new mount) and locks nothing")
    func requestForAnotherMountRefused() throws {
        let m = try Self.mount("complete")
        defer { m.close() }
        guard let pid = m.daemonPID, FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return }
        let other = try shell(["/usr/bin/python3", "-c", Self.controlClient, String(pid), "lock\\n/elsewhere/mnt\\n", "0"].map(shellQuote).joined(separator: " "))
        #expect(other.out == "69\tnot the daemon of /elsewhere/mnt (this one served \(m.mountpoint))\n", "\(other.out) \(other.err)")
        let own = try shell(["/usr/bin/python3", "-c", Self.controlClient, String(pid), "lock\\n\(m.mountpoint)\\n", "0"].map(shellQuote).joined(separator: " "))
        #expect(own.out == "0\tlocked; keys withheld: \(MountedFixture.account)\n", "\(own.out) \(own.err)")
    }

    @Test("a request that does not arrive whole within 2 s is answered 64, and the daemon serves the next one")
    func slowRequestTimesOut() throws {
        let m = try Self.mount("complete")
        defer { m.close() }
        guard let pid = m.daemonPID, FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return }
        let slow = try shell(["/usr/bin/python3", "-c", Self.controlClient, String(pid), "lo", "3"].map(shellQuote).joined(separator: " "))
        #expect(slow.out == "64\tthe request did not arrive within 2 s\n", "\(slow.out) \(slow.err)")
        #expect(try m.mamfs(["lock", m.mountpoint]).status == 0)
    }

    @Test("a passphrase state: unlock without the passphrase or with a wrong one exits 77 and the files stay closed; the right one opens them")
    func passphraseStateNeedsMamfsUnlock() throws {
        let dir = try TempDirectory(prefix: "mamfs-lockpass")
        let (state, backing, mnt) = (dir.file("state"), dir.file("backing"), dir.file("mnt"))
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mnt, withIntermediateDirectories: true)
        try Data("right horse battery\n".utf8).write(to: URL(fileURLWithPath: dir.file("pass")))
        try Data("wrong\n".utf8).write(to: URL(fileURLWithPath: dir.file("bad")))
        try Data(Self.policy("complete").utf8).write(to: URL(fileURLWithPath: dir.file("policy.json")))
        let env = ["MAMFS": MamfsBinary.path, "S": state, "B": backing, "M": mnt, "D": dir.path, "ACCT": MountedFixture.account]
        let daemons = { FuseMounts.daemonPIDs(serving: mnt) }
        defer { FuseMounts.tearDown(mnt, daemons: daemons()) }
        let result = try shell(#"""
        export MAMFS_STATE="$S"
        MAMFS_PASSPHRASE_FILE="$D/pass" "$MAMFS" init --passphrase-file "$D/pass" >/dev/null || exit 9
        MAMFS_PASSPHRASE_FILE="$D/pass" "$MAMFS" enroll "$ACCT" --policy "$D/policy.json" >/dev/null || exit 9
        MAMFS_PASSPHRASE_FILE="$D/pass" "$MAMFS" mount "$B" "$M" --account "$ACCT" -o log="$D/log" 2>/dev/null || exit 9
        printf 'pass-secret' > "$M/w.txt"
        "$MAMFS" lock "$M" >/dev/null; echo "lock=$?"
        "$MAMFS" unlock "$M" 2>&1; echo "none=$?"
        MAMFS_PASSPHRASE_FILE="$D/bad" "$MAMFS" unlock "$M" 2>&1; echo "wrong=$?"
        cat "$M/w.txt"; echo "read=$?"
        MAMFS_PASSPHRASE_FILE="$D/pass" "$MAMFS" unlock "$M" >/dev/null; echo "right=$?"
        cat "$M/w.txt"; echo " read=$?"
        """#, environment: env)
        #expect(result.out == """
        lock=0
        mamfs: unlock: \(mnt): key unavailable: the state in \(state) is protected by a passphrase: set MAMFS_PASSPHRASE_FILE to the passphrase file
        none=77
        mamfs: unlock: \(mnt): key unavailable: wrong passphrase
        wrong=77
        read=1
        right=0
        pass-secret read=0

        """, "\(result.out)\n\(result.err)")
    }

    @Test("lock and unlock of a directory that is not a mamfs mount, or of nothing, exit 66 saying which")
    func notAMount() throws {
        let dir = try TempDirectory(prefix: "mamfs-locknone")
        for verb in ["lock", "unlock"] {
            let result = try runProcess(MamfsBinary.path, [verb, dir.path], environment: testEnvironment())
            #expect(result.status == 66, "\(verb): \(result.status) \(result.err)")
            #expect(result.err == "mamfs: \(verb): \(dir.path): not a mamfs mount (name the mount's top directory)\n", "\(result.err)")
            let missing = try runProcess(MamfsBinary.path, [verb, dir.file("nothing")], environment: testEnvironment())
            #expect(missing.status == 66 && missing.err == "mamfs: \(verb): \(dir.file("nothing")): no such directory\n", "\(missing.err)")
        }
    }
}
