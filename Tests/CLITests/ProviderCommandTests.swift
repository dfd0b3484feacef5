import Foundation
import MAMProtection
import Testing
import MAMTestSupport

/// A sandbox with an enrolled managed account, a remote directory with a small tree and an
/// empty local root.
private struct ProviderSandbox {
    let sandbox: Sandbox
    let remote: String
    let local: String

    init() throws {
        sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        remote = sandbox.path("remote")
        local = sandbox.path("local")
        try sandbox.write("remote/a.txt", "alpha\n")
        try sandbox.write("remote/sub/b.bin", Fixtures.binary(10_000))
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
    }

    func run(_ arguments: [String]) throws -> ProcessResult { try sandbox.run(arguments) }

    /// The first sync pass, for the demo account (replicated root).
    func firstSync() throws {
        let result = try run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn])
        guard result.status == 0 else { throw SandboxError.failed("provider sync", result) }
    }

    /// Every remote file, relative path -> bytes.
    func remoteFiles() throws -> [String: Data] {
        var files: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(atPath: remote) else { return files }
        while let relative = walker.nextObject() as? String {
            let path = remote + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            files[relative] = try sandbox.read(path)
        }
        return files
    }

    /// The rule "cloud storage holds plain files only": no remote file starts with the magic.
    func expectRemotePlain(sourceLocation: SourceLocation = #_sourceLocation) throws {
        for (relative, bytes) in try remoteFiles() {
            #expect(!bytes.starts(with: ProtectedFileHeader.magic), "remote \(relative) is a protected file",
                    sourceLocation: sourceLocation)
        }
    }
}

@Suite("CLI: provider verbs")
struct ProviderCommandTests {
    static let verbs = ["provider sync", "provider status", "provider evict", "provider import"]

    @Test("help: mamfs --help lists the provider verbs, each answers --help, provider --help lists them all")
    func help() throws {
        let sandbox = try Sandbox()
        let top = try sandbox.run(["--help"], withState: false)
        #expect(top.status == 0)
        for verb in Self.verbs { #expect(top.out.contains("mamfs \(verb)"), "help lists \(verb)") }
        for verb in Self.verbs {
            let result = try sandbox.run(verb.split(separator: " ").map(String.init) + ["--help"], withState: false)
            #expect(result.status == 0)
            #expect(result.out.hasPrefix("usage: mamfs \(verb)"))
            #expect(result.out.contains("--state DIR"))
            #expect(result.stderr.isEmpty)
        }
        let group = try sandbox.run(["provider", "--help"], withState: false)
        #expect(group.status == 0)
        for verb in Self.verbs { #expect(group.out.contains("mamfs \(verb)")) }
        let mount = try sandbox.run(["mount", "--help"], withState: false)
        #expect(mount.out.contains("--remote DIR") && mount.out.contains("--provider") && mount.out.contains("--sync-interval")
                && mount.out.contains("--location NAME"))
    }

    @Test("usage errors exit 64 with one error line and a hint", arguments: [
        ["provider"],
        ["provider", "bogus"],
        ["provider", "sync"],
        ["provider", "sync", "a", "b"],
        ["provider", "sync", "a", "--remote"],
        ["provider", "sync", "a", "--remote", ""],
        ["provider", "sync", "a", "--json", "b"],
        ["provider", "sync", "a", "--bogus"],
        ["provider", "status"],
        ["provider", "status", "a", "b"],
        ["provider", "status", "a", "--bogus"],
        ["provider", "evict"],
        ["provider", "evict", "a", "b"],
        ["provider", "import", "x"],
        ["provider", "import", "x", "--to", ""],
        ["provider", "import", "--to", "d"],
        ["provider", "import", "x", "y", "--to", "d"],
        ["mount", "b", "m", "--provider", "replicated"],
        ["mount", "b", "m", "--remote", "r"],
        ["mount", "b", "m", "--remote", "r", "--provider", "bogus"],
        ["mount", "b", "m", "--remote", "", "--provider", "replicated"],
        ["mount", "b", "m", "--remote", "r", "--provider", "replicated", "--sync-interval", "0"],
        ["mount", "b", "m", "--remote", "r", "--provider", "replicated", "--sync-interval", "soon"],
        ["mount", "b", "m", "--remote", "r", "--provider", "non-replicated", "--sync-interval", "-1"],
        ["mount", "b", "m", "--sync-interval", "5"],
        ["mount", "b", "m", "--remote", "r", "--provider", "replicated", "--location", "Nowhere"],
        ["mount", "b", "m", "--remote", "r", "--provider", "non-replicated", "--location", ""],
        ["mount", "b", "m", "--location", "Other"],
    ])
    func usageErrors(arguments: [String]) throws {
        let result = try Sandbox().run(arguments)
        #expect(result.status == 64, "\(arguments): \(result.err)")
        #expect(result.errLines.count == 2, "\(arguments): \(result.err)")
        #expect(result.errLines.last?.hasPrefix("Try 'mamfs ") == true)
        #expect(result.stdout.isEmpty)
    }

    @Test("sync: a first pass fetches the remote tree into a replicated root, encrypted for the managed account; a second pass picks up remote changes")
    func syncRoundTrip() throws {
        let p = try ProviderSandbox()
        let first = try p.run(["provider", "sync", p.local, "--remote", p.remote, "--account", Fixtures.upn])
        #expect(first.status == 0, "\(first.err)")
        #expect(first.out.hasPrefix("Synced \(p.local): "))
        #expect(first.stderr.isEmpty, "no progress line when stderr is not a terminal")
        let info = try jsonArray(try p.run(["info", "--json", p.local + "/sub/b.bin"]))
        #expect(info.first?["owner"] as? String == Fixtures.account)
        #expect(info.first?["encrypted"] as? Bool == true)
        let copy = p.sandbox.path("b.copy")
        #expect(try p.run(["decrypt", p.local + "/sub/b.bin", "-o", copy]).status == 0)
        #expect(try p.sandbox.read(copy) == Fixtures.binary(10_000))

        try p.sandbox.write("remote/c.txt", "gamma\n")
        let second = try p.run(["provider", "sync", p.local])
        #expect(second.status == 0, "\(second.err)")
        #expect(second.out.contains("1 fetched"))
        #expect(p.sandbox.exists(p.local + "/c.txt"))
        let quiet = try p.run(["provider", "sync", p.local])
        #expect(quiet.status == 0)
        #expect(quiet.out == "Synced \(p.local): no changes\n")
        try p.expectRemotePlain()
    }

    @Test("sync: a new root without --remote is a usage error (64); another remote (64); a vanished remote exits 75 and keeps local data")
    func syncErrors() throws {
        let p = try ProviderSandbox()
        let noRemote = try p.run(["provider", "sync", p.local])
        #expect(noRemote.status == 64)
        #expect(noRemote.errLines.count == 1)
        #expect(noRemote.err.contains("--remote"))

        try p.firstSync()
        let other = p.sandbox.path("other-remote")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let wrong = try p.run(["provider", "sync", p.local, "--remote", other])
        #expect(wrong.status == 64, "\(wrong.err)")

        #expect(rename(p.remote, p.remote + ".gone") == 0)
        let gone = try p.run(["provider", "sync", p.local])
        #expect(gone.status == 75, "\(gone.err)")
        #expect(!gone.errLines.isEmpty)
        #expect(gone.out.contains("stopped early"))
        #expect(try p.sandbox.read(p.local + "/a.txt").count > 0)
        #expect(p.sandbox.exists(p.local + "/sub/b.bin"))
    }

    @Test("status --json: one object with every key; text status; outside a root 64; missing 66")
    func statusShape() throws {
        let p = try ProviderSandbox()
        try p.firstSync()
        let result = try p.run(["provider", "status", p.local + "/sub/b.bin", "--json"])
        #expect(result.status == 0, "\(result.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any])
        #expect(Set(object.keys) == ["path", "root", "kind", "itemIdentifier", "parentItemIdentifier", "filename", "type",
                                     "size", "contentVersion", "metadataVersion", "materialized", "pendingUpload",
                                     "owner", "localOwner", "encrypted", "queue"])
        #expect(object["queue"] is NSNull, "a replicated root has no upload queue")
        #expect(object["path"] as? String == p.local + "/sub/b.bin")
        #expect(object["root"] as? String == p.local)
        #expect(object["kind"] as? String == "replicated")
        #expect(object["itemIdentifier"] as? String == "sub/b.bin")
        #expect(object["parentItemIdentifier"] as? String == "sub")
        #expect(object["filename"] as? String == "b.bin")
        #expect(object["type"] as? String == "file")
        #expect((object["size"] as? NSNumber)?.intValue == Fixtures.binary(10_000).count)
        #expect((object["contentVersion"] as? String)?.isEmpty == false)
        #expect((object["metadataVersion"] as? String)?.isEmpty == false)
        #expect(object["materialized"] as? Bool == true)
        #expect(object["pendingUpload"] as? Bool == false)
        #expect(object["owner"] as? String == Fixtures.account)
        #expect(object["localOwner"] as? String == Fixtures.account)
        #expect(object["encrypted"] as? Bool == true)

        // A local file not uploaded yet: no item, nulls, pending upload.
        try p.sandbox.write("local/new.txt", "not yet\n")
        let pending = try p.run(["provider", "status", p.local + "/new.txt", "--json"])
        let pendingObject = try #require(try JSONSerialization.jsonObject(with: pending.stdout) as? [String: Any])
        #expect(pendingObject["itemIdentifier"] is NSNull)
        #expect(pendingObject["contentVersion"] is NSNull)
        #expect(pendingObject["localOwner"] is NSNull)
        #expect(pendingObject["pendingUpload"] as? Bool == true)

        let text = try p.run(["provider", "status", p.local + "/a.txt"])
        #expect(text.status == 0)
        #expect(text.out.contains("item:") && text.out.contains("a.txt") && text.out.contains("materialized:"))
        #expect(text.out.contains(Fixtures.account))

        let outside = try p.run(["provider", "status", p.sandbox.path("remote/a.txt")])
        #expect(outside.status == 64)
        #expect(outside.errLines.count == 1)
        let missing = try p.run(["provider", "status", p.local + "/nope"])
        #expect(missing.status == 66)
        #expect(missing.errLines.count == 1)
    }

    @Test("evict: a replicated root refuses (64); a path outside any root 64")
    func evictErrors() throws {
        let p = try ProviderSandbox()
        try p.firstSync()
        let replicated = try p.run(["provider", "evict", p.local + "/a.txt"])
        #expect(replicated.status == 64)
        #expect(replicated.errLines.count == 1)
        #expect(replicated.err.contains("replicated"))
        let outside = try p.run(["provider", "evict", p.sandbox.path("remote/a.txt")])
        #expect(outside.status == 64)
        #expect(p.sandbox.exists(p.local + "/a.txt"))
    }

    @Test("import: an encrypted file is decrypted before upload, the source stays as it was")
    func importEncrypted() throws {
        let p = try ProviderSandbox()
        try p.firstSync()
        let source = try p.sandbox.write("outside/report.txt", "quarterly numbers\n")
        #expect(try p.run(["encrypt", source, "--account", Fixtures.upn]).status == 0)
        let before = try p.sandbox.read(source)
        #expect(before.starts(with: ProtectedFileHeader.magic))

        let result = try p.run(["provider", "import", source, "--to", p.local + "/sub"])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("sub/report.txt"))
        #expect(try p.sandbox.read(p.remote + "/sub/report.txt") == Data("quarterly numbers\n".utf8))
        #expect(try p.sandbox.read(source) == before)
        let status = try p.run(["provider", "status", p.local + "/sub/report.txt", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: status.stdout) as? [String: Any])
        #expect(object["itemIdentifier"] as? String == "sub/report.txt")
        #expect(object["pendingUpload"] as? Bool == false)
        try p.expectRemotePlain()

        let again = try p.run(["provider", "import", source, "--to", p.local + "/sub"])
        #expect(again.status == 73, "the name is taken: \(again.err)")
        let missing = try p.run(["provider", "import", p.sandbox.path("outside/nope"), "--to", p.local])
        #expect(missing.status == 66)
    }

    @Test("import refused by canReceiveSharedFile (receiveData managedOnly, personal file): exit 77, nothing uploaded, source intact",
          arguments: ["untagged", "unmanaged"])
    func importRefused(kind: String) throws {
        let p = try ProviderSandbox()
        try p.firstSync()
        let source = try p.sandbox.write("outside/personal.txt", "my own notes\n")
        if kind == "unmanaged" {
            #expect(try p.run(["protect", source, "--account", ""]).status == 0)
        }
        let sourceBefore = try p.sandbox.read(source)
        let remoteBefore = try p.remoteFiles()
        let result = try p.run(["provider", "import", source, "--to", p.local])
        #expect(result.status == 77, "\(result.err)")
        #expect(result.errLines.count == 1)
        #expect(result.err.contains("denied by policy"))
        #expect(try p.remoteFiles() == remoteBefore)
        #expect(try p.sandbox.read(source) == sourceBefore)
        #expect(!p.sandbox.exists(p.local + "/personal.txt"))
        let quiet = try p.run(["provider", "sync", p.local])
        #expect(quiet.status == 0)
        #expect(try p.remoteFiles() == remoteBefore)
    }

    @Test("mount --provider non-replicated: status shows a placeholder, the first read materializes it, evict makes it a placeholder again",
          .enabled(if: fuseUsable))
    func nonReplicatedMount() throws {
        let p = try ProviderSandbox()
        let mountpoint = p.sandbox.path("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        defer { MountTests.forceUnmount(mountpoint) }
        let mount = try p.run(["mount", p.local, mountpoint, "--remote", p.remote, "--provider", "non-replicated",
                               "--account", Fixtures.upn, "-o", "attr_timeout=0,entry_timeout=0"])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        let file = mountpoint + "/sub/b.bin"
        func materialized() throws -> Bool? {
            let result = try p.run(["provider", "status", file, "--json"])
            let object = try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any]
            #expect(object?["kind"] as? String == "non-replicated")
            #expect((object?["size"] as? NSNumber)?.intValue == Fixtures.binary(10_000).count)
            return object?["materialized"] as? Bool
        }
        #expect(try materialized() == false)
        #expect(try p.sandbox.read(file) == Fixtures.binary(10_000))
        #expect(try materialized() == true)
        let evict = try p.run(["provider", "evict", file])
        #expect(evict.status == 0, "\(evict.err)")
        #expect(evict.stdout.isEmpty && evict.stderr.isEmpty)
        #expect(try materialized() == false)
        #expect(try p.sandbox.read(file) == Fixtures.binary(10_000))
        let missing = try p.run(["provider", "evict", mountpoint + "/sub/nope"])
        #expect(missing.status == 66)
        try p.expectRemotePlain()
        #expect(try p.run(["unmount", mountpoint]).status == 0)
    }

    @Test("paths inside a mamfs mount are mapped to its backing directory (status, import --to DIR_IN_MOUNT)",
          .enabled(if: fuseUsable))
    func pathsInMount() throws {
        let p = try ProviderSandbox()
        try p.firstSync()
        let mountpoint = p.sandbox.path("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        defer { MountTests.forceUnmount(mountpoint) }
        let mount = try p.run(["mount", p.local, mountpoint, "--account", Fixtures.upn])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }

        let status = try p.run(["provider", "status", mountpoint + "/sub/b.bin", "--json"])
        #expect(status.status == 0, "\(status.err)")
        let object = try JSONSerialization.jsonObject(with: status.stdout) as? [String: Any]
        #expect(object?["root"] as? String == p.local)
        #expect(object?["itemIdentifier"] as? String == "sub/b.bin")

        let source = try p.sandbox.write("outside/via-mount.txt", "through the mount\n")
        #expect(try p.run(["encrypt", source, "--account", Fixtures.upn]).status == 0)
        let imported = try p.run(["provider", "import", source, "--to", mountpoint + "/sub"])
        #expect(imported.status == 0, "\(imported.err)")
        #expect(try p.sandbox.read(p.remote + "/sub/via-mount.txt") == Data("through the mount\n".utf8))
        #expect(try p.sandbox.read(mountpoint + "/sub/via-mount.txt") == Data("through the mount\n".utf8))
        try p.expectRemotePlain()

        #expect(try p.run(["unmount", mountpoint]).status == 0)
    }
}
