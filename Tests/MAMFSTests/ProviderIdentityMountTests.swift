import Foundation
import Glibc
import Testing
@testable import MAMFS
import MAMTestSupport

private let fuseUsable: Bool = {
    let fd = open("/dev/fuse", O_RDWR)
    if fd >= 0 { close(fd) }
    return fd >= 0
}()

/// Stable item identifiers and remote change discovery, through a provider mount.
@Suite("File-provider identities and remote changes through the mount", .enabled(if: fuseUsable), .serialized)
struct ProviderIdentityMountTests {
    /// `mamfs provider status PATH --json` as an object.
    private func status(_ m: ProviderMount, _ path: String) throws -> [String: Any] {
        let result = try m.mamfs(["provider", "status", path, "--json"], check: false)
        guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any] else {
            throw TestSupportError("provider status \(path): exit \(result.status): \(result.err)")
        }
        return object
    }

    private func identifier(_ m: ProviderMount, _ path: String) -> String? {
        (try? status(m, path))?["itemIdentifier"] as? String
    }

    /// A top-level remote directory with at least two non-empty files below it (up to three).
    private func directoryWithFiles(_ m: ProviderMount) -> (String, [String])? {
        var byTop: [String: [String]] = [:]
        for (relative, size) in m.files(under: m.remote) where size > 0 {
            let parts = relative.split(separator: "/", maxSplits: 1)
            if parts.count == 2 { byTop[String(parts[0]), default: []].append(String(parts[1])) }
        }
        guard let (top, below) = byTop.filter({ $0.value.count >= 2 }).min(by: { $0.key < $1.key }) else { return nil }
        return (top, Array(below.sorted().prefix(3)))
    }

    @Test("a directory renamed through the mount and then on the remote (for WebDAV a MOVE on the server, which has no file ids): the files below it keep their itemIdentifier (provider status --json), bytes and owner",
          arguments: ProviderMountTests.kinds, ApacheDAVServer.isAvailable ? [false, true] : [false])
    func identityAcrossDirectoryRenames(kind: String, webdav: Bool) throws {
        let m = try ProviderMount(kind, syncInterval: 1, remoteCheckInterval: 1, webdav: webdav)
        defer { m.close() }
        let (directory, children) = try #require(directoryWithFiles(m))
        let bytes = children.map { m.read(m.remote + "/" + directory + "/" + $0) }
        #expect(m.read(m.mountpoint + "/" + directory + "/" + children[0]) == bytes[0], "one file materialized first")
        let ids = children.map { identifier(m, m.mountpoint + "/" + directory + "/" + $0) }
        #expect(ids.allSatisfy { $0 != nil } && Set(ids).count == children.count, "\(ids)")

        func expectKept(under top: String, _ what: String) throws {
            for (index, child) in children.enumerated() {
                let path = m.mountpoint + "/" + top + "/" + child
                #expect(m.read(path) == bytes[index], "\(what): \(child) bytes")
                let object = try status(m, path)
                #expect(object["itemIdentifier"] as? String == ids[index], "\(what): \(child) identifier \(object["itemIdentifier"] ?? "nil") != \(ids[index] ?? "nil")")
                #expect(object["owner"] as? String == ProviderMount.account && object["localOwner"] as? String == ProviderMount.account,
                        "\(what): \(child) owner")
            }
        }

        let local = try m.sh("mv \"$M/\(directory)\" \"$M/\(directory).local\"")
        #expect(local.status == 0, "\(local.err)")
        #expect(m.wait { m.inode(m.remote + "/" + directory + ".local/" + children[0]) != nil && m.inode(m.remote + "/" + directory) == nil },
                "renamed on the remote")
        #expect(m.wait { identifier(m, m.mountpoint + "/" + directory + ".local/" + children[1]) == ids[1] })
        try expectKept(under: directory + ".local", "after the rename through the mount")

        let remote: ProcessResult
        if let server = m.server {
            let from = server.baseURL + directory + ".local/", to = server.baseURL + directory + ".remote/"
            remote = try shell("curl -sf -o /dev/null -w '%{http_code}' -X MOVE -H \(shellQuote("Destination: " + to)) -u \(shellQuote(server.user + ":" + server.password)) \(shellQuote(from))")
            #expect(remote.out == "201", "MOVE: \(remote.out)")
        } else {
            remote = try m.sh("mv \"$R/\(directory).local\" \"$R/\(directory).remote\"")
        }
        #expect(remote.status == 0, "\(remote.err)")
        #expect(m.wait { children.allSatisfy { m.inode(m.mountpoint + "/" + directory + ".remote/" + $0) != nil } },
                "the remote rename shows in the mount")
        // A store without file ids has its renamed directory made anew, its files moved into
        // it, and the old one removed after them (in the same refresh).
        #expect(m.wait { m.inode(m.mountpoint + "/" + directory + ".local") == nil }, "the old directory is gone")
        try expectKept(under: directory + ".remote", "after the rename on the remote")
        try m.expectRemoteMatchesMount("after both renames")
    }

    @Test("non-replicated: remote changes show in the mount by themselves every --sync-interval: a new file, a changed placeholder and a changed clean copy (a placeholder again), a rename (identifier kept), a delete")
    func remoteChangesDiscovered() throws {
        let m = try ProviderMount("non-replicated", remoteCheckInterval: 1)
        defer { m.close() }
        let picks = m.someRemoteFiles(4)
        try #require(picks.count == 4)
        let (materialized, placeholder, deleted, renamed) = (picks[0], picks[1], picks[2], picks[3])
        #expect(m.read(m.mountpoint + "/" + materialized) == m.read(m.remote + "/" + materialized))
        #expect((m.files(under: m.backing)[materialized] ?? 0) > 0, "materialized")
        let renamedBytes = m.read(m.remote + "/" + renamed)
        let renamedId = try #require(identifier(m, m.mountpoint + "/" + renamed))

        let change = try m.sh("""
        echo 'from another client' > "$R/.tmp-new" && mv "$R/.tmp-new" "$R/remote-new.txt" && \
        echo 'changed remotely' > "$R/.tmp-mod" && mv "$R/.tmp-mod" "$R/\(materialized)" && \
        printf 'the placeholder changed, and is longer now\\n' > "$R/.tmp-ph" && mv "$R/.tmp-ph" "$R/\(placeholder)" && \
        rm "$R/\(deleted)" && mv "$R/\(renamed)" "$R/renamed-remotely.bin"
        """)
        #expect(change.status == 0, "\(change.err)")

        let placeholderBytes = Data("the placeholder changed, and is longer now\n".utf8)
        #expect(m.wait { m.files(under: m.mountpoint)["remote-new.txt"] == 20 }, "new file, with its size")
        #expect(m.wait { m.files(under: m.mountpoint)[placeholder] == placeholderBytes.count }, "placeholder size updated")
        #expect(m.files(under: m.backing)[placeholder] == 0, "still a placeholder")
        #expect(m.wait { m.files(under: m.backing)[materialized] == 0 }, "the clean copy of a changed item is a placeholder again")
        #expect(m.wait { m.inode(m.mountpoint + "/" + deleted) == nil }, "delete")
        #expect(m.wait { m.inode(m.mountpoint + "/renamed-remotely.bin") != nil }, "rename")
        #expect(m.inode(m.mountpoint + "/" + renamed) == nil)
        #expect(identifier(m, m.mountpoint + "/renamed-remotely.bin") == renamedId, "the renamed item keeps its identifier")

        #expect(m.read(m.mountpoint + "/remote-new.txt") == Data("from another client\n".utf8))
        #expect(m.read(m.mountpoint + "/" + placeholder) == placeholderBytes)
        #expect(m.read(m.mountpoint + "/" + materialized) == Data("changed remotely\n".utf8))
        #expect(m.read(m.mountpoint + "/renamed-remotely.bin") == renamedBytes)
        #expect(try m.backingHeader("remote-new.txt")?.owner == ProviderMount.account)
        #expect(try m.backingHeader("remote-new.txt")?.isEncrypted == true)
        try m.expectRemoteMatchesMount("after the remote changes")
    }

    @Test("a remote replaced by a copy (cp -a): sync refuses (exit 75, naming reattach), mamfs provider reattach re-binds it, sync works again; bytes, owners and identifiers unchanged, a local edit made before the replacement arrives",
          arguments: ProviderMountTests.kinds)
    func reattachReplacedRemote(kind: String) throws {
        let m = try ProviderMount(kind, syncInterval: 1)
        defer { m.close() }
        let picks = m.someRemoteFiles(3)
        try #require(picks.count == 3)
        let (edited, clean, untouched) = (picks[0], picks[1], picks[2])
        for path in [edited, clean] {
            #expect(m.read(m.mountpoint + "/" + path) == m.read(m.remote + "/" + path), "\(path) read (materialized) first")
        }
        let ids = picks.map { identifier(m, m.mountpoint + "/" + $0) }
        #expect(ids.allSatisfy { $0 != nil })

        // The remote goes away; an edit made meanwhile cannot be uploaded.
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        #expect(try m.sh("printf 'edited while the remote was away\\n' >> \"$M/\(edited)\"").status == 0)
        let editedBytes = try #require(m.read(m.mountpoint + "/" + edited))
        #expect(editedBytes.suffix(33) == Data("edited while the remote was away\n".utf8))
        #expect(m.wait(10) { (try? m.pendingUpload(m.mountpoint + "/" + edited)) == true }, "pending")

        // It comes back as a copy: another directory, another root inode.
        let copy = try m.sh("cp -a \"$R.away\" \"$R\" && rm -rf \"$R.away\"")
        #expect(copy.status == 0, "\(copy.err)")
        let refused = try m.mamfs(["provider", "sync", m.backing], check: false)
        #expect(refused.status == 75, "\(refused.status) \(refused.out) \(refused.err)")
        #expect(refused.err.contains("mamfs provider reattach"), "\(refused.err)")
        #expect(m.read(m.remote + "/" + edited) != editedBytes, "nothing uploaded while refused")

        let reattach = try m.mamfs(["provider", "reattach", m.backing], check: false)
        #expect(reattach.status == 0, "\(reattach.status) \(reattach.out) \(reattach.err)")
        #expect(reattach.out.contains("Reattached"), "\(reattach.out)")
        let sync = try m.mamfs(["provider", "sync", m.backing], check: false)
        #expect(sync.status == 0, "\(sync.status) \(sync.out) \(sync.err)")
        #expect(m.wait { m.read(m.remote + "/" + edited) == editedBytes }, "the edit arrived under its name")
        #expect(try !m.pendingUpload(m.mountpoint + "/" + edited))
        #expect(m.files(under: m.remote).keys.filter { $0.contains("conflict") }.isEmpty, "no conflict copies")
        for (index, path) in picks.enumerated() {
            let object = try status(m, m.mountpoint + "/" + path)
            #expect(object["itemIdentifier"] as? String == ids[index], "\(path) identifier")
            #expect(object["owner"] as? String == ProviderMount.account)
        }
        #expect(m.read(m.mountpoint + "/" + clean) == m.read(m.remote + "/" + clean))
        #expect(m.read(m.mountpoint + "/" + untouched) == m.read(m.remote + "/" + untouched))
        for path in [edited, clean, untouched] {
            #expect(try m.backingHeader(path)?.owner == ProviderMount.account, "\(path) owner")
        }
        try m.expectRemoteMatchesMount("after reattach and sync")
    }

    @Test("non-replicated: a file deleted on the remote while it holds local changes is kept and uploaded again by the next look for remote changes; a clean one is removed")
    func remoteDeleteOfChangedFile() throws {
        let m = try ProviderMount("non-replicated", remoteCheckInterval: 1)
        defer { m.close() }
        let picks = m.someRemoteFiles(2)
        try #require(picks.count == 2)
        let (changed, clean) = (picks[0], picks[1])
        #expect(m.read(m.mountpoint + "/" + changed) == m.read(m.remote + "/" + changed), "materialized first")
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        #expect(try m.sh("printf 'kept\\n' >> \"$M/\(changed)\"").status == 0)
        let changedBytes = try #require(m.read(m.mountpoint + "/" + changed))
        #expect(m.wait(10) { (try? m.pendingUpload(m.mountpoint + "/" + changed)) == true }, "pending")
        // Back (the same directory), without the two files.
        #expect(unlink(away + "/" + changed) == 0 && unlink(away + "/" + clean) == 0)
        #expect(rename(away, m.remote) == 0)
        #expect(m.wait { m.read(m.remote + "/" + changed) == changedBytes }, "uploaded again")
        #expect(m.wait { m.inode(m.mountpoint + "/" + clean) == nil }, "the clean one is removed")
        #expect(m.read(m.mountpoint + "/" + changed) == changedBytes, "the local file is kept")
        #expect(try m.backingHeader(changed)?.owner == ProviderMount.account)
        try m.expectRemoteMatchesMount("after the remote deletes")
    }
}
