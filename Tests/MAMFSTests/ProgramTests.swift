import Foundation
import Testing
import MAMProtection
import MAMTestSupport

/// Real programs on the mount, with the owner and encryption state of the backing files
/// checked after each.
@Suite("Real programs on the mount")
struct ProgramTests {
    /// Every regular backing file below `relative` has the mount's owner, encrypted exactly
    /// on the managed mount.
    private func expectTagged(_ m: MountedFixture, under relative: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let headers = try m.backingHeaders(under: relative)
        #expect(!headers.isEmpty, sourceLocation: sourceLocation)
        let wrong = headers.filter { $0.1?.owner != m.expectedOwner || $0.1?.isEncrypted != m.isManaged }
        #expect(wrong.isEmpty, "wrongly tagged: \(wrong.prefix(5).map { "\($0.0): \(String(describing: $0.1?.owner)) \(String(describing: $0.1?.isEncrypted))" })",
                sourceLocation: sourceLocation)
    }

    @Test("cp -a of /usr/share/doc in and out, byte for byte; no plaintext in the backing tree", arguments: MountedFixture.Kind.allCases)
    func copyDocTree(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            cp -a /usr/share/doc doc && diff -r --no-dereference /usr/share/doc doc && echo in-same && \
            cp -a doc "$P/docout" && diff -r --no-dereference /usr/share/doc "$P/docout" && echo out-same && \
            [ "$(cd /usr/share/doc && find . | sort | md5sum)" = "$(find doc -printf '%P\\n' | sed 's|^$|.|;s|^|./|;s|^./.$|.|' | sort | md5sum)" ] ; \
            stat -c %s /usr/share/doc/*/copyright | paste -sd+ | bc; stat -c %s doc/*/copyright | paste -sd+ | bc
            """, timeout: 600)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out.hasPrefix("in-same\nout-same\n"), "\(r.out)")
            let sums = r.out.split(separator: "\n").suffix(2)
            #expect(sums.count == 2 && sums.first == sums.last)
            try expectTagged(m, under: "doc")
            // The scan: a 32-byte slice from the middle of every source file must not appear in
            // its backing file when the file is encrypted.
            let scan = try shell("""
            python3 - "$B/doc" <<'PY'
            import os, sys
            root = sys.argv[1]
            checked = found = 0
            for dirpath, dirs, files in os.walk("/usr/share/doc"):
                for name in files:
                    src = os.path.join(dirpath, name)
                    if os.path.islink(src) or os.path.getsize(src) < 64: continue
                    data = open(src, "rb").read()
                    mid = len(data) // 2
                    needle = data[mid:mid + 32]
                    stored = open(os.path.join(root, os.path.relpath(src, "/usr/share/doc")), "rb").read()
                    checked += 1
                    if needle in stored: found += 1
            print(checked, found)
            PY
            """, environment: m.environment)
            let parts = scan.out.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            #expect(parts.count == 2 && parts[0] > 100, "\(scan.out) \(scan.err)")
            if parts.count == 2 {
                #expect(m.isManaged ? parts[1] == 0 : parts[1] == parts[0])
            }
        }
    }

    @Test("tar x into and tar c out of the mount", arguments: MountedFixture.Kind.allCases)
    func tarInOut(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            tar -C /usr/share -cf "$BASE/in.tar" doc/bash doc/git 2>/dev/null || tar -C /usr/share -cf "$BASE/in.tar" doc/bash
            tar -xf "$BASE/in.tar" && tar -df "$BASE/in.tar" && echo extracted-same && \
            tar -cf "$BASE/out.tar" doc && mkdir -p "$P/x" && tar -C "$P/x" -xf "$BASE/out.tar" && \
            diff -r --no-dereference doc "$P/x/doc" && echo out-same
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "extracted-same\nout-same\n")
            try expectTagged(m, under: "doc")
        }
    }

    @Test("rsync -aHAX in both directions keeps hard links, symlinks, modes and xattrs", arguments: MountedFixture.Kind.allCases)
    func rsyncBothWays(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            mkdir -p "$P/src/sub" && head -c 100000 /dev/urandom > "$P/src/a" && ln "$P/src/a" "$P/src/sub/a-link" && \
            ln -s ../a "$P/src/sub/sym" && echo hi > "$P/src/sub/b" && chmod 640 "$P/src/sub/b" && \
            setfattr -n user.note -v kept "$P/src/sub/b" && \
            rsync -aHAX "$P/src/" tree/ && rsync -aHAX tree/ "$P/back/" && \
            diff -r "$P/src" tree && diff -r "$P/src" "$P/back" && echo same && \
            [ "$(stat -c '%h %a' "$P/src/a" "$P/src/sub/b")" = "$(stat -c '%h %a' tree/a tree/sub/b)" ] && \
            [ "$(stat -c '%h %a' "$P/src/a" "$P/src/sub/b")" = "$(stat -c '%h %a' "$P/back/a" "$P/back/sub/b")" ] && \
            stat -c %h tree/a && readlink tree/sub/sym && \
            getfattr --only-values -n user.note tree/sub/b && echo && getfattr --only-values -n user.note "$P/back/sub/b" && echo
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "same\n2\n../a\nkept\nkept\n")
            try expectTagged(m, under: "tree")
        }
    }

    @Test("sqlite3 database filled inside the mount passes integrity_check", arguments: MountedFixture.Kind.allCases)
    func sqlite(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            sqlite3 db.sqlite 'pragma journal_mode=wal; create table t(id integer primary key, v text);' >/dev/null && \
            for i in $(seq 1 20); do echo "begin; $(for j in $(seq 1 200); do echo "insert into t(v) values (hex(randomblob(100)));"; done) commit;"; done | sqlite3 db.sqlite && \
            sqlite3 db.sqlite 'delete from t where id % 3 = 0; vacuum; pragma integrity_check; select count(*) from t;'
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "ok\n2667\n")
            let header = try m.backingHeader("db.sqlite")
            #expect(header?.owner == m.expectedOwner && header?.isEncrypted == m.isManaged)
        }
    }

    @Test("python write-temp-then-rename save, mmap read and write", arguments: MountedFixture.Kind.allCases)
    func pythonSaveAndMmap(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            python3 - <<'PY'
            import os, mmap
            with open("doc.txt", "w") as f: f.write("version 1\\n")
            tmp = "doc.txt.tmp"
            with open(tmp, "w") as f:
                f.write("version 2\\n" * 1000); f.flush(); os.fsync(f.fileno())
            os.replace(tmp, "doc.txt")
            print(open("doc.txt").read() == "version 2\\n" * 1000)
            with open("map.bin", "wb") as f: f.write(b"\\0" * 20000)
            with open("map.bin", "r+b") as f:
                mm = mmap.mmap(f.fileno(), 0)
                mm[4090:4100] = b"ABCDEFGHIJ"
                mm[19990:20000] = b"0123456789"
                mm.flush(); mm.close()
            with open("map.bin", "rb") as f:
                # A shared read-only map of a direct-I/O handle (PageCacheTests has the others).
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                print(mm[4090:4100], mm[19990:20000], len(mm))
                mm.close()
            PY
            sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; od -An -c -j 4090 -N 10 map.bin | tr -d ' '
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "True\nb'ABCDEFGHIJ' b'0123456789' 20000\nABCDEFGHIJ\n")
            for name in ["doc.txt", "map.bin"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == m.expectedOwner && header?.isEncrypted == m.isManaged)
            }
        }
    }

    @Test("flock between two processes; FIFOs, sockets and symlinks", arguments: MountedFixture.Kind.allCases)
    func locksFifosSymlinks(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            echo x > lockfile
            flock -x lockfile -c 'sleep 2' & holder=$!
            sleep 0.5
            flock -n -x lockfile -c true && echo not-exclusive || echo held
            wait $holder
            flock -n -x lockfile -c true && echo free
            python3 -c '
            import fcntl, os, time
            fd = os.open("lockfile", os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_EX)
            pid = os.fork()
            if pid == 0:
                fd2 = os.open("lockfile", os.O_RDWR)
                try:
                    fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB); print("posix not-exclusive")
                except OSError: print("posix held")
                os._exit(0)
            os.waitpid(pid, 0)'
            mkfifo pipe && (echo through-fifo > pipe &) && cat pipe && stat -c %F pipe
            python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("sock"); print("bound")' && stat -c %F sock
            ln -s lockfile link && readlink link && cat link && ln -s missing dangling && stat -c %F dangling && \
            ls -l dangling | grep -c -- '-> missing'
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "held\nfree\nposix held\nthrough-fifo\nfifo\nbound\nsocket\nlockfile\nx\nsymbolic link\n1\n")
        }
    }

    @Test("fallocate, SEEK_DATA/SEEK_HOLE, statfs, rename flags", arguments: MountedFixture.Kind.allCases)
    func miscOperations(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            echo abc > f && fallocate -l 10000 f && stat -c %s f && head -c 3 f && echo && \
            python3 -c '
            import os
            fd = os.open("f", os.O_RDONLY)
            print(os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 0, os.SEEK_HOLE) >= 4)
            try: os.posix_fallocate(fd, 0, 1)
            except OSError as e: print("ro fallocate", e.errno)
            ' && df "$M" | tail -1 | awk '{print ($2 > 0)}' && \
            echo one > a && echo two > b && python3 -c '
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            AT = -100
            r = libc.renameat2(AT, b"a", AT, b"b", 1)
            print("noreplace", r, ctypes.get_errno())
            r = libc.renameat2(AT, b"a", AT, b"b", 2)
            print("exchange", r, open("a").read().strip(), open("b").read().strip())
            '
            """)
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "10000\nabc\n0 True\nro fallocate 9\n1\nnoreplace -1 17\nexchange 0 two one\n", "\(r.out)")
        }
    }
}
