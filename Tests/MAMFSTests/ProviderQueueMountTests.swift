import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// The upload queue of a non-replicated mount: changes made while the remote is away, a
/// daemon killed with changes queued, RENAME_EXCHANGE, mkdir and hard links.
@Suite("Upload queue through a non-replicated mount", .enabled(if: ProviderMount.fuseUsable), .serialized)
struct ProviderQueueMountTests {
    /// `provider status --json` of the backing root, as an object.
    private func queueStatus(_ m: ProviderMount) throws -> [String: Any] {
        let result = try m.mamfs(["provider", "status", m.mountpoint, "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        return try #require(object["queue"] as? [String: Any], "\(result.out)")
    }

    private func queueCount(_ m: ProviderMount) -> Int {
        ((try? queueStatus(m))?["count"] as? Int) ?? -1
    }

    /// Exchanges two names with renameat2(RENAME_EXCHANGE).
    private func exchange(_ m: ProviderMount, _ a: String, _ b: String) throws -> ProcessResult {
        try m.sh("""
        python3 - "$M/\(a)" "$M/\(b)" <<'PY'
        import ctypes, os, sys
        libc = ctypes.CDLL(None, use_errno=True)
        AT_FDCWD = -100
        if libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(), 2) != 0:
            e = ctypes.get_errno(); print(os.strerror(e), file=sys.stderr); sys.exit(1)
        PY
        """)
    }

    @Test("remote unreachable: create, rename, re-create, mkdir, move, delete, two appends and a hard link are queued (status shows them, in order, the appends once); the remote back, each arrives once, in order")
    func offlineChangesArriveInOrder() throws {
        let m = try ProviderMount("non-replicated", options: ["retry_base=0.2"])
        defer { m.close() }
        let picks = m.someRemoteFiles(4)
        try #require(picks.count == 4)
        let (moved, deleted, appended, linked) = (picks[0], picks[1], picks[2], picks[3])
        let appendedBytes = try #require(m.read(m.mountpoint + "/" + appended))
        #expect(m.read(m.mountpoint + "/" + linked) != nil, "materialized")
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        let changes = try m.sh("""
        set -e
        printf 'v1\\n' > "$M/f.txt"
        mv "$M/f.txt" "$M/g.txt"
        printf 'v2\\n' > "$M/f.txt"
        mkdir "$M/empty-dir" "$M/into"
        mv "$M/\(moved)" "$M/into/moved.bin"
        rm "$M/\(deleted)"
        printf 'one\\n' >> "$M/\(appended)"
        printf 'two\\n' >> "$M/\(appended)"
        ln "$M/\(linked)" "$M/linked.copy"
        """)
        #expect(changes.status == 0, "\(changes.err)")
        #expect(m.wait(10) { ((try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "").contains("not uploaded") })

        let status = try queueStatus(m)
        let entries = status["entries"] as? [String] ?? []
        #expect(entries == ["changed f.txt", "renamed g.txt", "changed f.txt", "mkdir empty-dir", "mkdir into",
                            "renamed into/moved.bin", "removed \(deleted)", "changed \(appended)", "link linked.copy"],
                "\(entries)")
        #expect(status["count"] as? Int == entries.count)
        #expect((status["lastError"] as? String ?? "").contains("unreachable"), "\(status)")
        #expect(status["nextRetry"] is String, "\(status)")
        #expect((status["oldestAgeSeconds"] as? Double ?? -1) >= 0, "\(status)")
        let text = try m.mamfs(["provider", "status", m.backing])
        let countLine = text.out.split(separator: "\n").first { $0.contains("queued changes:") }
        #expect(countLine?.hasSuffix(" \(entries.count)") == true, "\(text.out)")
        #expect(text.out.contains("next retry:") && text.out.contains("oldest queued:"), "\(text.out)")
        #expect(text.out.contains("remote unreachable"), "\(text.out)")

        #expect(rename(away, m.remote) == 0)
        #expect(m.wait(30) { queueCount(m) == 0 }, "queue drained: \(String(describing: try? queueStatus(m)))")
        #expect(m.read(m.remote + "/g.txt") == Data("v1\n".utf8), "the first f.txt, renamed")
        #expect(m.read(m.remote + "/f.txt") == Data("v2\n".utf8), "the second f.txt")
        #expect(m.read(m.remote + "/into/moved.bin") != nil && m.inode(m.remote + "/" + moved) == nil)
        #expect(m.inode(m.remote + "/" + deleted) == nil)
        #expect(m.read(m.remote + "/" + appended) == appendedBytes + Data("one\ntwo\n".utf8))
        #expect(m.read(m.remote + "/linked.copy") == m.read(m.remote + "/" + linked))
        var st = stat()
        #expect(lstat(m.remote + "/empty-dir", &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR, "empty directory made")
        try m.expectRemoteMatchesMount("after the queue drained")
        let conflicts = m.files(under: m.remote).keys.filter { $0.contains("conflict") }
        #expect(conflicts.isEmpty, "nothing uploaded twice: \(conflicts)")
        #expect(m.read(m.log).map { String(decoding: $0, as: UTF8.self) }?.contains("not done") == false, "no change failed for good")
    }

    @Test("kill -9 of the daemon with changes queued (delete, rename, mkdir, new file): the next mount replays them before anything else")
    func killedDaemonLosesNothing() throws {
        let m = try ProviderMount("non-replicated", options: ["retry_base=600"])
        defer { m.close() }
        let picks = m.someRemoteFiles(2)
        try #require(picks.count == 2)
        let (deleted, renamed) = (picks[0], picks[1])
        let renamedBytes = try #require(m.read(m.remote + "/" + renamed))
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        let changes = try m.sh("""
        set -e
        rm "$M/\(deleted)"
        mv "$M/\(renamed)" "$M/renamed-offline.bin"
        mkdir "$M/made-offline"
        printf 'queued\\n' > "$M/new-offline.txt"
        """)
        #expect(changes.status == 0, "\(changes.err)")
        #expect(m.wait(10) { queueCount(m) == 4 }, "\(String(describing: try? queueStatus(m)))")
        let pids = FuseMounts.daemonPIDs(serving: m.mountpoint)
        try #require(!pids.isEmpty)
        for pid in pids { #expect(kill(pid, SIGKILL) == 0) }
        FuseMounts.reap(pids)
        #expect(FuseMounts.unmount(m.mountpoint))
        m.close()
        #expect(rename(away, m.remote) == 0)

        let again = try ProviderMount(reopening: m)
        defer { again.close() }
        #expect(queueCount(again) == 0)
        #expect(again.inode(again.remote + "/" + deleted) == nil, "delete replayed")
        #expect(again.inode(again.mountpoint + "/" + deleted) == nil, "not back as a placeholder")
        #expect(again.read(again.remote + "/renamed-offline.bin") == renamedBytes, "rename replayed")
        #expect(again.inode(again.remote + "/" + renamed) == nil && again.inode(again.mountpoint + "/" + renamed) == nil)
        var st = stat()
        #expect(lstat(again.remote + "/made-offline", &st) == 0, "mkdir replayed")
        #expect(again.read(again.remote + "/new-offline.txt") == Data("queued\n".utf8))
        try again.expectRemoteMatchesMount("after the remount")
    }

    @Test("RENAME_EXCHANGE of two provided files exchanges them on the remote; each name then keeps uploading to the remote file of that name")
    func exchangeReachesRemote() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let picks = m.someRemoteFiles(2)
        try #require(picks.count == 2)
        let (a, b) = (picks[0], picks[1])
        let bytesA = try #require(m.read(m.mountpoint + "/" + a))
        let bytesB = try #require(m.read(m.remote + "/" + b))
        let swap = try exchange(m, a, b)
        #expect(swap.status == 0, "\(swap.err)")
        #expect(m.read(m.mountpoint + "/" + a) == bytesB)
        #expect(m.wait { m.read(m.remote + "/" + a) == bytesB && m.read(m.remote + "/" + b) == bytesA }, "exchanged on the remote")
        #expect(m.wait { queueCount(m) == 0 })
        #expect(try m.sh("printf 'after the exchange\\n' >> \"$M/\(a)\"").status == 0)
        #expect(m.wait { m.read(m.remote + "/" + a) == bytesB + Data("after the exchange\n".utf8) }, "the name a uploads to the remote a")
        #expect(m.read(m.remote + "/" + b) == bytesA, "the remote b untouched")
        try m.expectRemoteMatchesMount("after the exchange")
        #expect(!m.files(under: m.remote).keys.contains { $0.contains("mamfs-exchange") })
    }

    @Test("an empty mkdir is made on the remote; a hard link is uploaded as its own remote file and removed with its name")
    func mkdirAndLink() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let source = try #require(m.someRemoteFiles(1).first)
        let bytes = try #require(m.read(m.remote + "/" + source))
        #expect(try m.sh("mkdir \"$M/empty\" && mkdir -p \"$M/deep/er\"").status == 0)
        var st = stat()
        #expect(m.wait { lstat(m.remote + "/empty", &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR }, "empty directory on the remote")
        #expect(m.wait { lstat(m.remote + "/deep/er", &st) == 0 }, "nested directory on the remote")
        // A placeholder linked (its contents come from its remote item), then a materialized file.
        #expect(try m.sh("ln \"$M/\(source)\" \"$M/link-of-placeholder\"").status == 0)
        #expect(m.wait { m.read(m.remote + "/link-of-placeholder") == bytes }, "link of a placeholder uploaded")
        #expect(try m.sh("printf 'linked text\\n' > \"$M/orig.txt\" && ln \"$M/orig.txt\" \"$M/empty/link.txt\"").status == 0)
        #expect(m.wait { m.read(m.remote + "/empty/link.txt") == Data("linked text\n".utf8) }, "hard link uploaded")
        #expect(m.read(m.remote + "/orig.txt") == Data("linked text\n".utf8))
        #expect(try m.sh("rm \"$M/empty/link.txt\"").status == 0)
        #expect(m.wait { m.inode(m.remote + "/empty/link.txt") == nil }, "removed with its name")
        #expect(m.read(m.remote + "/orig.txt") == Data("linked text\n".utf8), "the other name stays")
        #expect(m.protectedRemoteFiles().isEmpty)
    }

    @Test("an exchange, a rename of one side and a new file under its old name, made while the remote was away, reach it right after a remount (the queue replayed by paths follows the later moves)")
    func exchangeReplayedAfterRemount() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        #expect(try m.sh("printf AAA > \"$M/ea\" && printf BBB > \"$M/eb\"").status == 0)
        #expect(m.wait { m.read(m.remote + "/ea") == Data("AAA".utf8) && m.read(m.remote + "/eb") == Data("BBB".utf8) })
        // Uploaded and recorded as items (the attributes are written after the upload).
        #expect(m.wait(30) { queueCount(m) == 0 }, "queue drained: \(String(describing: try? queueStatus(m)))")
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        let moved = try m.sh(#"""
        python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); m = os.environ["M"]
        assert libc.renameat2(-100, (m + "/ea").encode(), -100, (m + "/eb").encode(), 2) == 0' && \
        mv "$M/eb" "$M/ec" && printf newb > "$M/eb"
        """#)
        #expect(moved.status == 0, "\(moved.err)")
        #expect(m.wait(5) { ((try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "").contains("retried in") })
        m.close()
        #expect(rename(away, m.remote) == 0)
        let again = try ProviderMount(reopening: m)
        defer { again.close() }
        let expected = ["ea": "BBB", "eb": "newb", "ec": "AAA"]
        #expect(again.wait { expected.allSatisfy { again.read(again.remote + "/" + $0.key) == Data($0.value.utf8) } },
                "\(expected.keys.sorted().map { "\($0)=\(String(decoding: again.read(again.remote + "/" + $0) ?? Data(), as: UTF8.self))" })")
        for (name, bytes) in expected {
            #expect(again.read(again.mountpoint + "/" + name) == Data(bytes.utf8), "\(name) in the mount")
        }
        try again.expectRemoteMatchesMount("after the remount")
    }

    @Test("a slow download holds neither the open of another placeholder nor the remote work queued meanwhile; both files read their own bytes")
    func slowDownloadHoldsNothingElse() throws {
        var slow = LyingDAVServer.File(String(repeating: "slow bytes\n", count: 20), etag: "\"s1\"")
        slow.getDelay = 8
        let server = try LyingDAVServer(files: ["slow.txt": slow, "fast.txt": LyingDAVServer.File("fast bytes\n", etag: "\"f1\"")])
        let m = try ProviderMount("non-replicated", remoteURL: server.baseURL)
        defer { m.close() }
        let r = try m.sh(#"""
        cat "$M/slow.txt" > "$B.slow" & pid=$!
        sleep 1
        start=$(date +%s%N); cat "$M/fast.txt"; end=$(date +%s%N)
        echo "fast_ms=$(( (end - start) / 1000000 ))"
        start=$(date +%s%N); printf 'new\n' > "$M/new.txt" && sync "$M/new.txt"; end=$(date +%s%N)
        echo "upload_ms=$(( (end - start) / 1000000 ))"
        wait $pid; echo "slow=$?"; cat "$B.slow"; rm -f "$B.slow"
        """#)
        let lines = r.out.split(separator: "\n").map(String.init)
        #expect(lines.first == "fast bytes" && lines.contains("slow=0"), "\(r.out) \(r.err)")
        func milliseconds(_ key: String) -> Int {
            lines.first { $0.hasPrefix(key + "=") }.flatMap { Int($0.dropFirst(key.count + 1)) } ?? .max
        }
        // The slow GET answers 8 s after it started; the other open and an fsync'd upload
        // (fsync returns once the queue uploaded it) wait for nothing of it.
        #expect(milliseconds("fast_ms") < 4_000, "the other placeholder waited \(milliseconds("fast_ms")) ms for the slow download")
        #expect(milliseconds("upload_ms") < 4_000, "the upload waited \(milliseconds("upload_ms")) ms for the slow download")
        #expect(r.out.hasSuffix(String(repeating: "slow bytes\n", count: 20)), "\(r.out)")
    }
}

