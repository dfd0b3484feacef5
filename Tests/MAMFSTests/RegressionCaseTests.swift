import Foundation
import Testing
import MAMProtection
@testable import MAMFS
import MAMTestSupport

/// Inputs that broke filesystems like this one (truncation races, hard links, appends, modes,
/// a full disk, xattrs, times), each on an encrypting (managed) mount and
/// an unmanaged one, compared with a plain directory where the case says so.
@Suite("Regression cases: truncation, hard links, appends, modes, full disk, xattrs, times")
struct RegressionCaseTests {
    /// Runs a Python script with the directory as argv[1] on the mount and on the plain
    /// directory; both outputs must be equal and the runs must succeed.
    private func compareWithPlain(_ m: MountedFixture, _ python: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let script = m.base + "/case-\(UUID().uuidString.prefix(8)).py"
        try Data(python.utf8).write(to: URL(fileURLWithPath: script))
        let onMount = try shell("python3 \(shellQuote(script)) \(shellQuote(m.mountpoint))")
        let onPlain = try shell("python3 \(shellQuote(script)) \(shellQuote(m.plain))")
        #expect(onMount.status == 0, "mount: \(onMount.err)", sourceLocation: sourceLocation)
        #expect(onPlain.status == 0, "plain: \(onPlain.err)", sourceLocation: sourceLocation)
        #expect(onMount.out == onPlain.out, sourceLocation: sourceLocation)
        #expect(!onMount.out.isEmpty, sourceLocation: sourceLocation)
    }

    private func python(_ m: MountedFixture, _ code: String, timeout: TimeInterval = 300) throws -> ProcessResult {
        let script = m.base + "/case-\(UUID().uuidString.prefix(8)).py"
        try Data(code.utf8).write(to: URL(fileURLWithPath: script))
        return try shell("python3 \(shellQuote(script)) \(shellQuote(m.mountpoint))", timeout: timeout)
    }

    @Test("shrink by path while a descriptor is open, then write through it", arguments: MountedFixture.Kind.allCases)
    func f1ShrinkWhileOpen(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            try compareWithPlain(m, """
            import os, sys, hashlib
            d = sys.argv[1]
            for variant in ("path", "fd"):
                f = os.path.join(d, "f1-" + variant)
                fd = os.open(f, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, b"A" * 4096)
                if variant == "path": os.truncate(f, 8)
                else: os.ftruncate(fd, 8)
                os.write(fd, b"B" * 10)
                if variant == "path": os.truncate(f, 5)
                else: os.ftruncate(fd, 5)
                os.close(fd)
                data = open(f, "rb").read()
                print(variant, len(data), hashlib.sha256(data).hexdigest(), os.stat(f).st_size)
            """)
        }
    }

    @Test("a reader sees new content after another descriptor truncates to zero", arguments: MountedFixture.Kind.allCases)
    func f2ReaderAfterTruncate(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            try compareWithPlain(m, """
            import os, sys
            f = os.path.join(sys.argv[1], "f2")
            fd1 = os.open(f, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd1, b"abc")
            fd2 = os.open(f, os.O_RDONLY)
            print(os.pread(fd2, 100, 0))
            os.ftruncate(fd1, 0)
            os.pwrite(fd1, b"xyz", 0)
            print(os.pread(fd2, 100, 0))
            """)
        }
    }

    @Test("truncate-and-rewrite racing a reader: no EIO, no other bytes", arguments: MountedFixture.Kind.allCases)
    func f3TruncateRacingReader(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try python(m, """
            import os, sys, threading
            f = os.path.join(sys.argv[1], "f3")
            a = os.open(f, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.pwrite(a, b"0123456789", 0)
            b = os.open(f, os.O_RDONLY)
            bad = []
            stop = False
            def reader():
                while not stop:
                    try:
                        got = os.pread(b, 10, 0)
                    except OSError as e:
                        bad.append(repr(e)); continue
                    if got not in (b"", b"0123456789"): bad.append(got)
            t = threading.Thread(target=reader); t.start()
            for i in range(5000):
                os.ftruncate(a, 0)
                os.pwrite(a, b"0123456789", 0)
            stop = True; t.join()
            print("bad", len(bad), bad[:3])
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "bad 0 []\n")
        }
    }

    @Test("hard-linked names agree about size, bytes and owner", arguments: MountedFixture.Kind.allCases)
    func f4HardLinks(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            touch f1 && ln f1 f2 && echo asdasd > f1 && stat -c %s f2 && echo more >> f2 && cat f1 && \
            [ "$(getfattr --only-values -n user.mam.owner f1 2>&1)" = "$(getfattr --only-values -n user.mam.owner f2 2>&1)" ] && \
            stat -c %h:%i f1 && stat -c %h:%i f2
            """)
            #expect(r.status == 0, "\(r.err)")
            let lines = r.out.split(separator: "\n").map(String.init)
            #expect(Array(lines.prefix(3)) == ["7", "asdasd", "more"])
            #expect(lines.count == 5 && lines[3] == lines[4] && lines[3].hasPrefix("2:"))
            #expect(try m.backingHeader("f2")?.owner == m.expectedOwner)
        }
    }

    @Test("appending through write-only handles, also from two processes at once", arguments: MountedFixture.Kind.allCases)
    func f5Append(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("echo foo > f && echo bar >> f && cat f")
            #expect(r.status == 0 && r.out == "foo\nbar\n", "\(r.err)")
            let p = try python(m, """
            import os, sys, re
            f = os.path.join(sys.argv[1], "log")
            open(f, "w").close()
            pids = []
            for who in ("a", "b"):
                pid = os.fork()
                if pid == 0:
                    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
                    for i in range(1000):
                        os.write(fd, ("%s line %04d with some padding to cross block edges\\n" % (who, i)).encode())
                    os.close(fd)
                    os._exit(0)
                pids.append(pid)
            for pid in pids: os.waitpid(pid, 0)
            lines = open(f).read().split("\\n")
            assert lines[-1] == ""
            lines = lines[:-1]
            whole = [l for l in lines if re.fullmatch(r"[ab] line \\d{4} with some padding to cross block edges", l)]
            print(len(lines), len(whole), len(set(whole)))
            """)
            #expect(p.status == 0, "\(p.err)")
            #expect(p.out == "2000 2000 2000\n")
        }
    }

    @Test("writeback_cache is refused with a clear error")
    func f5WritebackCacheRefused() throws {
        let base = NSTemporaryDirectory() + "mamfs-wb-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base + "/b", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: base + "/m", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: base + "/s", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let context = try ProtectionContext.initialize(stateDirectory: StateDirectory(path: base + "/s/state"), passphraseFile: nil)
        var options = MountOptions(backingDirectory: base + "/b", mountpoint: base + "/m", fuseOptions: ["writeback_cache"])
        #expect(throws: MAMError.self) { try MountDaemon.prepare(&options, context: context) }
    }

    @Test("files whose mode forbids reading, and git's read-only objects", arguments: MountedFixture.Kind.allCases)
    func f6ReadOnlyModes(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            try compareWithPlain(m, """
            import os, sys
            d = sys.argv[1]
            f = os.path.join(d, "ro")
            fd = os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o444)
            os.write(fd, b"x" * 5000)
            os.close(fd)
            print(len(open(f, "rb").read()), oct(os.stat(f).st_mode))
            g = os.path.join(d, "chmodded")
            fd = os.open(g, os.O_CREAT | os.O_RDWR, 0o644)
            os.write(fd, b"0123456789")
            os.chmod(g, 0o444)
            os.ftruncate(fd, 4)
            os.close(fd)
            print(open(g, "rb").read())
            """)
            let r = try m.sh("""
            git init -q repo && cd repo && git config user.email t@e && git config user.name t && \
            for i in $(seq 1 30); do echo "content $i" > file$i; done && git add . && git commit -qm one && \
            echo more >> file1 && git commit -qam two && git gc -q && git fsck --strict 2>&1 && git log --oneline | wc -l
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out.hasSuffix("2\n"))
        }
    }

    @Test("a non-root user writes a 0200 file with pwrite at offset 3 (allow_other)")
    func f6NonRootWriteOnly() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            let r = try m.sh("""
            mkdir -m 1777 shared && chmod 755 "$BASE" && \
            setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
            import os
            fd = os.open("shared/wo", os.O_CREAT | os.O_WRONLY, 0o200)
            os.pwrite(fd, b"abc", 3)
            os.close(fd)
            try:
                open("shared/wo", "rb")
                print("read allowed")
            except PermissionError:
                print("read denied")
            ' && od -An -c shared/wo | tr -s ' ' && stat -c %U shared/wo
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "read denied\n \\0 \\0 \\0 a b c\nnobody\n")
        }
    }

    @Test("reading a moved open file; rmdir after removing an open file", arguments: MountedFixture.Kind.allCases)
    func f7MovedOpenFile(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            echo content > f && exec 3<f && mkdir d && mv f d/ && cat <&3 && \
            mkdir e && touch e/x && exec 4<e/x && rm e/x && rmdir e && echo removed && ls -A "$B" | grep -c '^e$'
            """)
            #expect(r.out == "content\nremoved\n0\n", "\(r.err)")
        }
    }

    @Test("truncation racing an appending writer; overlapping writers", arguments: MountedFixture.Kind.allCases)
    func f8TruncateRacingWriter(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try python(m, """
            import os, sys, time
            d = sys.argv[1]
            f = os.path.join(d, "f8")
            open(f, "w").close()
            chunk = bytes(range(256)) * 256
            writer = os.fork()
            if writer == 0:
                fd = os.open(f, os.O_WRONLY | os.O_APPEND)
                end = time.time() + 6
                while time.time() < end: os.write(fd, chunk)
                os._exit(0)
            truncator = os.fork()
            if truncator == 0:
                end = time.time() + 6
                while time.time() < end: open(f, "w").close()
                os._exit(0)
            errors = 0
            end = time.time() + 6
            while time.time() < end:
                try: data = open(f, "rb").read()
                except OSError: errors += 1
            os.waitpid(writer, 0); os.waitpid(truncator, 0)
            data = open(f, "rb").read()
            ok = len(data) % len(chunk) == 0 and data == chunk * (len(data) // len(chunk))
            print("errors", errors, "whole", ok)
            g = os.path.join(d, "overlap")
            bad = 0
            for i in range(200):
                open(g, "w").close()
                p = os.fork()
                if p == 0:
                    fd = os.open(g, os.O_WRONLY); os.pwrite(fd, b"n" * 4096, 0); os._exit(0)
                fd = os.open(g, os.O_WRONLY); os.pwrite(fd, b"s" * 16, 4080); os.close(fd)
                os.waitpid(p, 0)
                got = open(g, "rb").read()
                if got not in (b"n" * 4096, b"n" * 4080 + b"s" * 16): bad += 1
            print("bad", bad)
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "errors 0 whole True\nbad 0\n")
        }
    }

    @Test("the backing disk fills up", arguments: MountedFixture.Kind.allCases)
    func f9DiskFull(kind: MountedFixture.Kind) throws {
        let tmpfs = NSTemporaryDirectory() + "mamfs-tmpfs-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: tmpfs, withIntermediateDirectories: true)
        let mounted = try shell("mount -t tmpfs -o size=4m tmpfs \(shellQuote(tmpfs))")
        try #require(mounted.status == 0, "\(mounted.err)")
        defer {
            _ = try? shell("umount \(shellQuote(tmpfs)) || umount -l \(shellQuote(tmpfs))")
            try? FileManager.default.removeItem(atPath: tmpfs)
        }
        let m = try MountedFixture(kind, backing: tmpfs)
        defer { m.close() }
        let r = try m.sh("""
        i=0; : > "$BASE/written"
        while dd if=/dev/urandom of=f$i bs=64k count=3 conv=fsync status=none 2>/dev/null; do
          sha256sum f$i >> "$BASE/written"; i=$((i+1)); [ $i -gt 200 ] && break
        done
        echo "files $i"
        sha256sum -c --quiet "$BASE/written" && echo verified
        for f in f*; do cat "$f" > /dev/null || echo "unreadable $f"; done
        rm -f f$i
        python3 - <<'PY'
        import sqlite3
        db = sqlite3.connect("db.sqlite")
        db.execute("create table t(x blob)")
        db.commit()
        try:
            for i in range(100000):
                db.execute("insert into t values (randomblob(4000))")
                if i % 10 == 0: db.commit()
        except sqlite3.OperationalError as e:
            print("full:", "full" in str(e) or "disk" in str(e))
        db.close()
        PY
        sqlite3 db.sqlite 'pragma integrity_check'
        "$MAMFS" accounts --state "$S" > /dev/null && echo state-ok
        """)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("verified\n"))
        #expect(!r.out.contains("unreadable"))
        #expect(r.out.contains("full: True\nok\nstate-ok\n"), "\(r.out)")
        #expect(!r.out.contains("files 0\n"))
    }

    @Test("256 MiB of random data with dd bs=4M; odd offsets read back", arguments: MountedFixture.Kind.allCases)
    func f10LargeFile(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            dd if=/dev/urandom of="$BASE/src" bs=4M count=64 status=none && \
            dd if="$BASE/src" of=big bs=4M status=none && \
            a=$(sha256sum < "$BASE/src") && b=$(sha256sum < big) && [ "$a" = "$b" ] && echo same && \
            c=$(dd if=big bs=4M status=none | sha256sum) && [ "$a" = "$c" ] && echo same4m && \
            for skip in 1 4095 4097 123457 268000000; do
              x=$(dd if=big bs=1 count=100000 skip=$skip status=none | sha256sum)
              y=$(dd if="$BASE/src" bs=1 count=100000 skip=$skip status=none | sha256sum)
              [ "$x" = "$y" ] || echo "differs at $skip"
            done; stat -c %s big; rm -f "$BASE/src"
            """, timeout: 600)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "same\nsame4m\n268435456\n")
            let header = try m.backingHeader("big")
            #expect(header?.isEncrypted == m.isManaged)
        }
    }

    @Test("extended attributes pass through; cp --preserve=all and rsync -aX both ways", arguments: MountedFixture.Kind.allCases)
    func f11Xattrs(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            echo data > f && setfattr -n user.a -v '' f && setfattr -n user.b -v hello f && getfattr -d f && \
            mkdir -p "$P/src" && echo one > "$P/src/one" && setfattr -n user.c -v plain "$P/src/one" && \
            cp -a --preserve=all "$P/src" cpin && rsync -aX "$P/src/" rsyncin/ && \
            getfattr --only-values -n user.c cpin/one && echo && getfattr --only-values -n user.c rsyncin/one && echo && \
            mkdir -p "$P/out" && cp -a --preserve=all f "$P/out/f" && rsync -aX f "$P/out/g" && \
            getfattr --only-values -n user.b "$P/out/f" && echo && getfattr --only-values -n user.b "$P/out/g" && echo && \
            getfattr -d -m - "$P/out/f" | grep -c user.mam || true
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out.contains("user.a=\"\"\nuser.b=\"hello\""))
            // A work file's copy outside the mount carries its owner and encryption; a personal one nothing.
            #expect(r.out.hasSuffix("plain\nplain\nhello\nhello\n\(m.isManaged ? 2 : 0)\n"), "\(r.out)")
        }
    }

    @Test("path truncates while the file is held open read-only", arguments: MountedFixture.Kind.allCases)
    func f12TruncateWhileHeld(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try python(m, """
            import os, sys
            f = os.path.join(sys.argv[1], "f12")
            with open(f, "wb") as out: out.write(os.urandom(20000))
            held = os.open(f, os.O_RDONLY)
            errors = 0
            for i in range(300):
                os.truncate(f, 3000 + i)
                try: os.pread(held, 30000, 0)
                except OSError: errors += 1
                os.truncate(f, 9000 + 7 * i)
                try: data = os.pread(held, 30000, 0)
                except OSError: errors += 1
            print("errors", errors, len(data))
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "errors 0 11093\n")
        }
    }

    @Test("two parallel truncate loops finish and the file decrypts", arguments: MountedFixture.Kind.allCases)
    func f13ParallelTruncates(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            head -c 50000 /dev/urandom > f
            loop() { for i in $(seq 1 2000); do truncate -s $RANDOM f || echo fail; done; }
            timeout 120 bash -c "$(declare -f loop); loop" & a=$!
            timeout 120 bash -c "$(declare -f loop); loop" & b=$!
            wait $a; ra=$?; wait $b; rb=$?
            echo "$ra $rb"; cat f > /dev/null && echo readable
            """, timeout: 200)
            #expect(r.out == "0 0\nreadable\n", "\(r.err)")
        }
    }

    @Test("times set with one side omitted (tar x, touch -m, touch -a)", arguments: MountedFixture.Kind.allCases)
    func f14Times(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            mkdir -p "$P/t" && echo a > "$P/t/a" && echo b > "$P/t/b" && \
            touch -m -d '2001-02-03 04:05:06' "$P/t/a" && touch -d '1999-12-31 23:59:59' "$P/t/b" && \
            tar -C "$P" -cf "$BASE/t.tar" t && tar -xf "$BASE/t.tar" && tar -df "$BASE/t.tar" && echo nodiff && \
            stat -c %Y t/a t/b && echo x > c && touch -m -d '2010-01-01 00:00:00' c && touch -a -d '2011-01-01 00:00:00' c && \
            stat -c '%X %Y' c
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out.hasPrefix("nodiff\n"))
            let lines = r.out.split(separator: "\n")
            #expect(lines.count == 4)
            #expect(lines.last == "1293840000 1262304000")
            let expectedA = try shell("date -d '2001-02-03 04:05:06' +%s").out.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(lines.count > 1 && String(lines[1]) == expectedA)
        }
    }
}
