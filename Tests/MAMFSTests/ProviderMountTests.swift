import Foundation
import Glibc
import MAMProtection
import Testing
@testable import MAMFS
import MAMTestSupport

/// A file-provider mount for one test: a fresh state with the managed account enrolled under
/// a chosen policy, a remote holding a copy of part of /usr/share/doc, and `mamfs mount
/// --remote --provider` through the real CLI (attribute and entry timeouts 0, so changes made
/// in the backing directory by the CLI or a sync pass are seen at once). Teardown always
/// unmounts and ends the daemon.
final class ProviderMount: @unchecked Sendable {
    static let account = MountedFixture.account
    /// How many files of /usr/share/doc the remote gets (sorted by path).
    static let docFiles = 300

    let kind: String
    let base: String
    let state: String
    let remote: String
    let backing: String
    let mountpoint: String
    let log: String
    /// Extra `-o` words of the mount (e.g. retry_base=S).
    let options: [String]
    /// The WebDAV server the mount's remote is on (nil: the remote is the directory `remote`).
    /// `remote` is then the directory Apache serves.
    let server: ApacheDAVServer?
    /// The URL of a WebDAV server the test runs itself (nil: `server` or the directory).
    let remoteURL: String?
    /// The `--remote-credentials` file of a WebDAV mount (0600).
    var credentialsFile: String { base + "/credentials" }
    private var mounted = false

    var environment: [String: String] {
        ["M": mountpoint, "B": backing, "R": remote, "S": state, "MAMFS": MamfsBinary.path, "ACCT": Self.account, "BASE": base]
    }

    /// - Parameters:
    ///   - kind: "non-replicated" or "replicated".
    ///   - encrypt: the account's `fileProviderEncryptFiles`.
    ///   - receiveData: the account's `receiveData`.
    ///   - location: the mount's `--location` (nil: not given).
    ///   - remoteCheckInterval: a non-replicated mount's `--sync-interval` (nil: not given, the
    ///     default of 30 s).
    ///   - options: extra `-o` words.
    ///   - webdav: put the remote on a real Apache WebDAV server (`--remote URL`,
    ///     `--remote-credentials FILE`).
    ///   - remoteURL: a WebDAV URL of the test's own server to mount instead (no credentials).
    init(_ kind: String, encrypt: Bool = true, receiveData: String = "all", syncInterval: Double = 1,
         location: String? = nil, remoteCheckInterval: Double? = nil, options: [String] = [], webdav: Bool = false,
         remoteURL: String? = nil) throws {
        self.kind = kind
        self.remoteURL = remoteURL
        self.options = options
        base = NSTemporaryDirectory() + "mamfs-pm-\(UUID().uuidString.prefix(12))"
        state = base + "/state"
        server = webdav ? try ApacheDAVServer() : nil
        remote = server?.davDirectory ?? base + "/remote"
        backing = base + "/backing"
        mountpoint = base + "/mnt"
        log = base + "/daemon.log"
        for dir in [base, remote, backing, mountpoint] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        let policy = base + "/policy.json"
        try Data("""
        {"fileEncryptionRequired": \(encrypt), "fileProviderEncryptFiles": \(encrypt), "receiveData": "\(receiveData)"}
        """.utf8).write(to: URL(fileURLWithPath: policy))
        try mamfs(["init"])
        try mamfs(["enroll", Self.account, "--policy", policy])
        let copy = try shell("cd /usr/share/doc && find . -type f | sort | head -n \(Self.docFiles) | tar -cf - -T - | tar -xf - -C \(shellQuote(remote))")
        guard copy.status == 0 else { throw TestSupportError("copy of /usr/share/doc failed: \(copy.err)") }
        if let server {
            _ = try shell("chown -R www-data:www-data \(shellQuote(server.davDirectory))")
            try Data("machine 127.0.0.1 login \(server.user) password \(server.password)\n".utf8)
                .write(to: URL(fileURLWithPath: credentialsFile))
            chmod(credentialsFile, 0o600)
        }
        var arguments = ["mount", backing, mountpoint, "--provider", kind, "--account", Self.account,
                         "-o", (["attr_timeout=0,entry_timeout=0,log=" + log] + options).joined(separator: ",")] + remoteArguments
        if kind == "replicated" { arguments += ["--sync-interval", String(syncInterval)] }
        if kind == "non-replicated", let remoteCheckInterval { arguments += ["--sync-interval", String(remoteCheckInterval)] }
        if let location { arguments += ["--location", location] }
        try mamfs(arguments)
        mounted = true
    }

    /// Mounts the state, remote and backing directory of `previous` (closed) again.
    init(reopening previous: ProviderMount) throws {
        kind = previous.kind
        base = previous.base
        state = previous.state
        server = previous.server
        remote = previous.remote
        backing = previous.backing
        mountpoint = previous.mountpoint
        log = previous.log
        options = previous.options
        remoteURL = previous.remoteURL
        try mamfs(["mount", backing, mountpoint, "--provider", kind, "--account", Self.account,
                   "-o", (["attr_timeout=0,entry_timeout=0,log=" + log] + options).joined(separator: ",")] + remoteArguments)
        mounted = true
    }

    /// `--remote DIR`, or `--remote URL --remote-credentials FILE` for a WebDAV remote.
    var remoteArguments: [String] {
        if let remoteURL { return ["--remote", remoteURL] }
        guard let server else { return ["--remote", remote] }
        return ["--remote", server.baseURL, "--remote-credentials", credentialsFile]
    }

    deinit {
        close()
        try? FileManager.default.removeItem(atPath: base)
    }

    @discardableResult
    func mamfs(_ arguments: [String], check: Bool = true) throws -> ProcessResult {
        try MamfsCLI.run(arguments, state: state, check: check)
    }

    /// Runs a bash script with $M, $B, $R, $S, $MAMFS, $ACCT set.
    func sh(_ script: String) throws -> ProcessResult {
        try shell(script, environment: environment)
    }

    var isMounted: Bool { FuseMounts.isMounted(mountpoint) }

    /// Unmounts and waits for the daemon to exit (it stops its sync thread first). Idempotent.
    func close() {
        guard mounted else { return }
        mounted = false
        FuseMounts.tearDown(mountpoint)
    }

    // MARK: Trees

    /// Regular files below `root` (relative path -> size), `.mamfs-provider` left out.
    func files(under root: String) -> [String: Int] {
        var result: [String: Int] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return result }
        while let relative = walker.nextObject() as? String {
            if relative == ".mamfs-provider" { walker.skipDescendants(); continue }
            var st = stat()
            guard lstat(root + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            result[relative] = Int(st.st_size)
        }
        return result
    }

    func read(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// Remote files that start with the protected-file magic (must always be empty).
    func protectedRemoteFiles() -> [String] {
        files(under: remote).keys.filter { relative in
            guard let handle = FileHandle(forReadingAtPath: remote + "/" + relative) else { return false }
            defer { try? handle.close() }
            let prefix = handle.readData(ofLength: ProtectedFileHeader.magic.count)
            return Array(prefix) == ProtectedFileHeader.magic
        }.sorted()
    }

    func backingHeader(_ relative: String) throws -> ProtectedFileHeader? {
        let fd = open(backing + "/" + relative, O_RDONLY)
        guard fd >= 0 else { throw TestSupportError("cannot open backing \(relative): errno \(errno)") }
        defer { Glibc.close(fd) }
        return try ProtectedFileHeader.read(fd: fd)
    }

    func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    /// Waits up to `seconds` (nominal, stretched by `Patience`) for `condition` (sync passes
    /// and uploads run after close).
    @discardableResult
    func wait(_ seconds: Double = 15, _ condition: () -> Bool) -> Bool {
        Patience.waitUntil(seconds, condition)
    }

    /// A remote file not in the first few (sorted), for the scenarios.
    func someRemoteFiles(_ count: Int) -> [String] {
        Array(files(under: remote).filter { $0.value > 0 }.keys.sorted().prefix(count))
    }
    /// Remote and mount hold the same files with the same bytes, and nothing on the remote is
    /// a protected file. Waits for the queued uploads first (`provider status` shows them).
    func expectRemoteMatchesMount(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let settled = wait { files(under: remote) == files(under: mountpoint) }
        #expect(settled, "\(what): names and sizes differ: remote-only \(Set(files(under: remote).keys).subtracting(files(under: mountpoint).keys).sorted()), mount-only \(Set(files(under: mountpoint).keys).subtracting(files(under: remote).keys).sorted())", sourceLocation: sourceLocation)
        let diff = try sh("diff -r \"$R\" \"$M\" && echo same")
        #expect(diff.out == "same\n", "\(what): \(diff.out.prefix(500)) \(diff.err.prefix(500))", sourceLocation: sourceLocation)
        #expect(protectedRemoteFiles().isEmpty, "\(what): header magic on the remote", sourceLocation: sourceLocation)
    }

    /// True when `provider status` reports a pending upload for `path`.
    func pendingUpload(_ path: String) throws -> Bool {
        try mamfs(["provider", "status", path, "--json"]).out.contains("\"pendingUpload\" : true")
    }
}

extension ProviderMount {
    /// True when /dev/fuse can be opened (the provider mount suites run only then).
    static let fuseUsable: Bool = {
        let fd = open("/dev/fuse", O_RDWR)
        if fd >= 0 { Glibc.close(fd) }
        return fd >= 0
    }()
}

@Suite("File providers through the mount", .enabled(if: ProviderMount.fuseUsable), .serialized)
struct ProviderMountTests {
    static let kinds = ["non-replicated", "replicated"]

    @Test("every remote file appears with its size, reads give the remote bytes, the backing copy is encrypted exactly when shouldFileProviderEncryptFiles; the remote stays plain",
          arguments: kinds, [true, false])
    func providedTree(kind: String, encrypt: Bool) throws {
        let m = try ProviderMount(kind, encrypt: encrypt)
        defer { m.close() }
        let remoteFiles = m.files(under: m.remote)
        #expect(remoteFiles.count == ProviderMount.docFiles)
        #expect(m.files(under: m.mountpoint) == remoteFiles, "names and sizes in the mount")
        if kind == "non-replicated" {
            let backing = m.files(under: m.backing)
            #expect(Set(backing.keys) == Set(remoteFiles.keys))
            #expect(backing.values.allSatisfy { $0 == 0 }, "placeholders before the first open")
        }
        // The provider's own files and attributes are not part of the mount.
        let hidden = try m.sh("ls -a \"$M\" | grep -c mamfs-provider; cat \"$M/.mamfs-provider/provider.db\" 2>&1 >/dev/null | grep -c 'No such file'; getfattr -d -m - -R \"$M\" 2>/dev/null | grep -c user.mam.fp")
        #expect(hidden.out == "0\n1\n0\n", "\(hidden.err)")

        let diff = try m.sh("diff -r \"$R\" \"$M\" && echo same")
        #expect(diff.out == "same\n", "\(diff.out.prefix(500)) \(diff.err.prefix(500))")
        var wrong: [String] = []
        for relative in remoteFiles.keys {
            let header = try m.backingHeader(relative)
            if header?.owner != ProviderMount.account || header?.isEncrypted != encrypt { wrong.append(relative) }
        }
        #expect(wrong.isEmpty, "backing copies not \(encrypt ? "encrypted" : "plain-tagged"): \(wrong.prefix(5))")
        if encrypt {
            let sample = try #require(m.someRemoteFiles(1).first)
            let raw = try #require(m.read(m.backing + "/" + sample))
            let plain = try #require(m.read(m.remote + "/" + sample))
            #expect(raw.range(of: plain.prefix(64)) == nil, "ciphertext in the backing copy")
        }
        #expect(m.protectedRemoteFiles().isEmpty)
    }

    @Test("local changes are pushed: a file written in the mount uploads plain bytes, rename moves the remote item without re-upload, delete deletes",
          arguments: kinds)
    func localChanges(kind: String) throws {
        let m = try ProviderMount(kind)
        defer { m.close() }
        let picks = m.someRemoteFiles(3)
        try #require(picks.count == 3)
        let (modified, renamed, deleted) = (picks[0], picks[1], picks[2])

        // Create and modify.
        let created = try m.sh("echo 'written in the mount' > \"$M/new-file.txt\" && printf 'appended\\n' >> \"$M/\(modified)\"")
        #expect(created.status == 0, "\(created.err)")
        let expectedModified = (m.read(m.mountpoint + "/" + modified) ?? Data())
        #expect(expectedModified.suffix(9) == Data("appended\n".utf8))
        #expect(m.wait { m.read(m.remote + "/new-file.txt") == Data("written in the mount\n".utf8) }, "created file uploaded")
        #expect(m.wait { m.read(m.remote + "/" + modified) == expectedModified }, "modified file uploaded")
        #expect(m.protectedRemoteFiles().isEmpty)

        // Rename (into another directory, under a new name): the remote file keeps its inode.
        let remoteInode = try #require(m.inode(m.remote + "/" + renamed))
        let backingInode = try #require(m.inode(m.backing + "/" + renamed))
        let mv = try m.sh("mkdir -p \"$M/moved-here\" && mv \"$M/\(renamed)\" \"$M/moved-here/renamed.txt\"")
        #expect(mv.status == 0, "\(mv.err)")
        #expect(m.wait { m.inode(m.remote + "/moved-here/renamed.txt") == remoteInode }, "renamed on the remote, same inode")
        #expect(m.inode(m.remote + "/" + renamed) == nil)
        #expect(m.inode(m.backing + "/moved-here/renamed.txt") == backingInode, "local inode kept")
        #expect(m.read(m.mountpoint + "/moved-here/renamed.txt") == m.read(m.remote + "/moved-here/renamed.txt"))

        // Delete.
        #expect(try m.sh("rm \"$M/\(deleted)\"").status == 0)
        #expect(m.wait { m.inode(m.remote + "/" + deleted) == nil }, "deleted on the remote")
        #expect(m.protectedRemoteFiles().isEmpty)
        #expect(m.files(under: m.mountpoint) == m.files(under: m.remote), "mount and remote agree")
    }

    @Test("non-replicated: removing a symlink to an item removes the link only; the item it names stays on the remote")
    func removingASymlinkKeepsItsTarget() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let pick = try #require(m.someRemoteFiles(1).first)
        // Relative: in the backing directory the link names the backing copy of the item.
        let made = try m.sh("ln -s \"\(pick)\" \"$M/link\" && rm \"$M/link\" && echo after > \"$M/after.txt\"")
        #expect(made.status == 0, "\(made.err)")
        // The queue runs in order: once the later file is up, the removal has been replayed.
        #expect(m.wait { m.read(m.remote + "/after.txt") == Data("after\n".utf8) }, "later file uploaded")
        #expect(m.inode(m.remote + "/" + pick) != nil, "the symlink's target was deleted on the remote")
        #expect(m.read(m.mountpoint + "/" + pick) == m.read(m.remote + "/" + pick))
    }

    @Test("non-replicated: mamfs provider evict drops the local copy, a re-read gives identical bytes; status follows")
    func evictAndRematerialize() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let name = try #require(m.someRemoteFiles(1).first)
        let path = m.mountpoint + "/" + name
        let status0 = try m.mamfs(["provider", "status", path, "--json"])
        #expect(status0.out.contains("\"materialized\" : false"), "\(status0.out)")
        let first = try #require(m.read(path))
        #expect(first == m.read(m.remote + "/" + name))
        #expect(try m.backingHeader(name)?.isEncrypted == true)
        #expect(try m.mamfs(["provider", "status", path, "--json"]).out.contains("\"materialized\" : true"))

        let evict = try m.mamfs(["provider", "evict", path], check: false)
        #expect(evict.status == 0, "\(evict.err)")
        #expect(m.files(under: m.backing)[name] == 0, "placeholder again")
        #expect(m.files(under: m.mountpoint)[name] == first.count, "placeholder keeps the size")
        #expect(try m.mamfs(["provider", "status", path, "--json"]).out.contains("\"materialized\" : false"))
        #expect(m.read(path) == first, "re-materialized bytes")
        #expect((m.files(under: m.backing)[name] ?? 0) > 0)
        #expect(m.protectedRemoteFiles().isEmpty)
    }

    @Test("mamfs provider import into the mount: an encrypted file is decrypted before upload", arguments: kinds)
    func importEncrypted(kind: String) throws {
        let m = try ProviderMount(kind)
        defer { m.close() }
        let source = m.base + "/outside/report.txt"
        try FileManager.default.createDirectory(atPath: m.base + "/outside", withIntermediateDirectories: true)
        try Data("quarterly numbers\n".utf8).write(to: URL(fileURLWithPath: source))
        try m.mamfs(["encrypt", source, "--account", ProviderMount.account])
        let before = try #require(m.read(source))
        #expect(Array(before.prefix(8)) == ProtectedFileHeader.magic)
        let directory = try #require(m.files(under: m.remote).keys.sorted().first.map { ($0 as NSString).deletingLastPathComponent })
        let result = try m.mamfs(["provider", "import", source, "--to", m.mountpoint + "/" + directory], check: false)
        #expect(result.status == 0, "\(result.err)")
        #expect(m.read(m.remote + "/" + directory + "/report.txt") == Data("quarterly numbers\n".utf8))
        #expect(m.read(source) == before, "source intact")
        #expect(m.read(m.mountpoint + "/" + directory + "/report.txt") == Data("quarterly numbers\n".utf8))
        #expect(m.protectedRemoteFiles().isEmpty)
    }

    @Test("a refused import (receiveData none, or managedOnly with a personal file) exits 77, remote and source unchanged; a refused file created in the mount stays local and is logged",
          arguments: kinds, ["none", "managedOnly"])
    func refusedImport(kind: String, receiveData: String) throws {
        let m = try ProviderMount(kind, receiveData: receiveData)
        defer { m.close() }
        try FileManager.default.createDirectory(atPath: m.base + "/outside", withIntermediateDirectories: true)
        let source = m.base + "/outside/personal.txt"
        try Data("my own notes\n".utf8).write(to: URL(fileURLWithPath: source))
        try m.mamfs(["protect", source, "--account", ""])
        let sourceBefore = try #require(m.read(source))
        let remoteBefore = m.files(under: m.remote)
        let result = try m.mamfs(["provider", "import", source, "--to", m.mountpoint], check: false)
        #expect(result.status == 77, "\(result.err)")
        #expect(result.err.contains("denied by policy"))
        #expect(m.read(source) == sourceBefore)
        #expect(m.files(under: m.remote) == remoteBefore)
        #expect(m.inode(m.backing + "/personal.txt") == nil)

        // The same rule for a file created in the mount: an unmanaged-tagged directory gives
        // its new files the unmanaged owner, which the account may not receive.
        let local = try m.sh("""
        mkdir "$M/personal" && setfattr -n user.mam.owner -v '' "$M/personal" && echo 'kept local' > "$M/personal/note.txt" && \
        getfattr --only-values -n user.mam.owner "$M/personal/note.txt"; echo "|"; cat "$M/personal/note.txt"
        """)
        #expect(local.out == "|\nkept local\n", "\(local.err)")
        #expect(m.wait(5) { ((try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "").contains("denied by policy") }, "refusal logged")
        #expect(m.read(m.remote + "/personal/note.txt") == nil, "nothing uploaded")
        #expect(m.read(m.mountpoint + "/personal/note.txt") == Data("kept local\n".utf8), "the local file stays")
        #expect(m.protectedRemoteFiles().isEmpty)
    }

    @Test("replicated: remote changes (create, modify, delete, rename) appear in the mount after a sync pass")
    func remoteChangesAppear() throws {
        let m = try ProviderMount("replicated", syncInterval: 1)
        defer { m.close() }
        let picks = m.someRemoteFiles(3)
        try #require(picks.count == 3)
        let (modified, deleted, renamed) = (picks[0], picks[1], picks[2])
        let renamedBytes = try #require(m.read(m.remote + "/" + renamed))
        // Another client: new files are written to a temp name and renamed into place.
        let change = try m.sh("""
        echo 'from another client' > "$R/.tmp-new" && mv "$R/.tmp-new" "$R/remote-new.txt" && \
        echo 'changed remotely' > "$R/.tmp-mod" && mv "$R/.tmp-mod" "$R/\(modified)" && \
        rm "$R/\(deleted)" && mv "$R/\(renamed)" "$R/renamed-remotely.bin"
        """)
        #expect(change.status == 0, "\(change.err)")
        #expect(m.wait { m.read(m.mountpoint + "/remote-new.txt") == Data("from another client\n".utf8) }, "create")
        #expect(m.wait { m.read(m.mountpoint + "/" + modified) == Data("changed remotely\n".utf8) }, "modify")
        #expect(m.wait { m.inode(m.mountpoint + "/" + deleted) == nil }, "delete")
        #expect(m.wait { m.read(m.mountpoint + "/renamed-remotely.bin") == renamedBytes }, "rename")
        #expect(m.inode(m.mountpoint + "/" + renamed) == nil)
        #expect(try m.backingHeader("remote-new.txt")?.isEncrypted == true)
        #expect(m.protectedRemoteFiles().isEmpty)
        #expect(m.files(under: m.mountpoint) == m.files(under: m.remote))
    }

    // MARK: Save patterns (regressions: uploads raced the rename and went up under the temp name)

    @Test("non-replicated: write temp then rename over (python, repeated), and rename of a never-uploaded file: the remote holds exactly the mount's files with the new bytes")
    func saveByRenameOver() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let picks = m.someRemoteFiles(2)
        try #require(picks.count == 2)
        let (target, placeholderTarget) = (picks[0], picks[1])
        #expect(m.read(m.mountpoint + "/" + target) == m.read(m.remote + "/" + target), "materialized first")
        let remoteInodeBefore = m.inode(m.remote + "/" + target)
        let save = try m.sh("""
        python3 - "$M/\(target)" "$M/\(placeholderTarget)" <<'PY'
        import os, sys
        for round in range(5):
            for path in sys.argv[1:]:
                tmp = path + ".tmp"
                with open(tmp, "wb") as f:
                    f.write(("saved %d %s\\n" % (round, os.path.basename(path))).encode() * 100)
                os.rename(tmp, path)
        PY
        """)
        #expect(save.status == 0, "\(save.err)")
        for path in [target, placeholderTarget] {
            let expected = Data(String(repeating: "saved 4 \((path as NSString).lastPathComponent)\n", count: 100).utf8)
            #expect(m.read(m.mountpoint + "/" + path) == expected)
            #expect(m.wait { m.read(m.remote + "/" + path) == expected }, "\(path): new bytes on the remote under its name")
            #expect(m.inode(m.remote + "/" + path + ".tmp") == nil, "no temp name on the remote")
            #expect(try !m.pendingUpload(m.mountpoint + "/" + path), "\(path) uploaded")
        }
        #expect(remoteInodeBefore != nil)
        try m.expectRemoteMatchesMount("after temp+rename saves")

        // A new file renamed right after its close (never uploaded under its first name).
        let fresh = try m.sh("printf 'fresh\\n' > \"$M/fresh.part\" && mv \"$M/fresh.part\" \"$M/fresh.txt\" && printf 'two\\n' > \"$M/two.tmp\" && mv \"$M/two.tmp\" \"$M/two.txt\" && mv \"$M/two.txt\" \"$M/two-final.txt\"")
        #expect(fresh.status == 0, "\(fresh.err)")
        #expect(m.wait { m.read(m.remote + "/fresh.txt") == Data("fresh\n".utf8) })
        #expect(m.wait { m.read(m.remote + "/two-final.txt") == Data("two\n".utf8) })
        try m.expectRemoteMatchesMount("after renames of new files")

        // The same after a remount: nothing pending, nothing stale comes back as a placeholder.
        m.close()
        let again = try ProviderMount(reopening: m)
        defer { again.close() }
        try again.expectRemoteMatchesMount("after remount")
        #expect(again.files(under: again.mountpoint)[target + ".tmp"] == nil)
        #expect(try !again.pendingUpload(again.mountpoint + "/" + target))
    }

    @Test("non-replicated: vim-like save (.swp, rename to backup~, write new, fsync, remove backup and swap): the remote has the new file only")
    func vimLikeSave() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let create = try m.sh("printf 'first version\\n' > \"$M/memo.txt\"")
        #expect(create.status == 0)
        #expect(m.wait { m.read(m.remote + "/memo.txt") == Data("first version\n".utf8) })
        let existing = try #require(m.someRemoteFiles(1).first)
        let save = try m.sh("""
        python3 - "$M/memo.txt" "$M/\(existing)" <<'PY'
        import os, sys
        # Even rounds fsync like vim, odd ones only close (the upload then runs after the reply).
        for round in range(8):
            for path in sys.argv[1:]:
                d, b = os.path.split(path)
                swp = os.path.join(d, "." + b + ".swp")
                with open(swp, "wb") as s:
                    s.write(b"b0VIM swap" * 50)
                    if round % 2 == 0:
                        s.flush(); os.fsync(s.fileno())
                    os.rename(path, path + "~")
                    with open(path, "wb") as f:
                        f.write(("edited %d\\n" % round).encode())
                        if round % 2 == 0:
                            f.flush(); os.fsync(f.fileno())
                    os.unlink(path + "~")
                os.unlink(swp)
        PY
        """)
        #expect(save.status == 0, "\(save.err)")
        for path in ["memo.txt", existing] {
            #expect(m.wait { m.read(m.remote + "/" + path) == Data("edited 7\n".utf8) }, "\(path) on the remote")
        }
        try m.expectRemoteMatchesMount("after vim-like saves")
        let stray = m.files(under: m.remote).keys.filter { $0.hasSuffix("~") || $0.hasSuffix(".swp") }
        #expect(stray.isEmpty, "\(stray)")
    }

    @Test("non-replicated: mv over an existing file: the remote item of the source is moved (same remote inode, no re-upload), the replaced one is gone")
    func moveOverExisting() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let picks = m.someRemoteFiles(3)
        try #require(picks.count == 3)
        let (source, target, placeholderSource) = (picks[0], picks[1], picks[2])
        let sourceBytes = try #require(m.read(m.mountpoint + "/" + source))
        let remoteInode = try #require(m.inode(m.remote + "/" + source))
        #expect(try m.sh("mv \"$M/\(source)\" \"$M/\(target)\"").status == 0)
        #expect(m.wait { m.inode(m.remote + "/" + target) == remoteInode }, "moved, not re-uploaded")
        #expect(m.read(m.remote + "/" + target) == sourceBytes)
        #expect(m.inode(m.remote + "/" + source) == nil)
        try m.expectRemoteMatchesMount("after mv over")

        // A placeholder moved over a file, and a new file moved over the result.
        let placeholderBytes = try #require(m.read(m.remote + "/" + placeholderSource))
        #expect(try m.sh("mv \"$M/\(placeholderSource)\" \"$M/\(target)\"").status == 0)
        #expect(m.wait { m.read(m.remote + "/" + target) == placeholderBytes })
        #expect(try m.sh("printf 'brand new\\n' > \"$M/new.bin\" && mv \"$M/new.bin\" \"$M/\(target)\"").status == 0)
        #expect(m.wait { m.read(m.remote + "/" + target) == Data("brand new\n".utf8) })
        try m.expectRemoteMatchesMount("after mv of a placeholder and of a new file over")
    }

    @Test("non-replicated: uploads that failed (remote unreachable) stay pending; provider sync pushes them, exits 75 while the remote is away; evict refuses a pending file with exit 73 'has a pending upload'")
    func syncFlushesPendingUploads() throws {
        // The mount's own retries wait long enough for the command to do the work.
        let m = try ProviderMount("non-replicated", options: ["retry_base=600"])
        defer { m.close() }
        let existing = try #require(m.someRemoteFiles(1).first)
        #expect(m.read(m.mountpoint + "/" + existing) != nil)
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        let write = try m.sh("printf 'offline\\n' > \"$M/offline.txt\" && printf 'more\\n' >> \"$M/\(existing)\" && printf 'saved offline\\n' > \"$M/offline.tmp\" && mv \"$M/offline.tmp\" \"$M/offline-saved.txt\"")
        #expect(write.status == 0, "\(write.err)")
        #expect(m.wait(5) { ((try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "").contains("not uploaded") })
        for path in ["offline.txt", existing, "offline-saved.txt"] {
            #expect(try m.pendingUpload(m.mountpoint + "/" + path), "\(path) pending")
        }

        let evict = try m.mamfs(["provider", "evict", m.mountpoint + "/offline.txt"], check: false)
        #expect(evict.status == 73, "\(evict.status) \(evict.err)")
        #expect(evict.err.contains("has a pending upload"), "\(evict.err)")
        let evictChanged = try m.mamfs(["provider", "evict", m.mountpoint + "/" + existing], check: false)
        #expect(evictChanged.status == 73 && evictChanged.err.contains("has a pending upload"), "\(evictChanged.err)")

        let unreachable = try m.mamfs(["provider", "sync", m.backing], check: false)
        #expect(unreachable.status == 75, "\(unreachable.status) \(unreachable.out) \(unreachable.err)")

        #expect(rename(away, m.remote) == 0)
        let sync = try m.mamfs(["provider", "sync", m.backing], check: false)
        #expect(sync.status == 0, "\(sync.err)")
        #expect(!sync.out.contains("no changes"), "\(sync.out)")
        #expect(m.read(m.remote + "/offline.txt") == Data("offline\n".utf8))
        #expect(m.read(m.remote + "/offline-saved.txt") == Data("saved offline\n".utf8))
        #expect(m.read(m.remote + "/" + existing) == m.read(m.mountpoint + "/" + existing))
        for path in ["offline.txt", existing, "offline-saved.txt"] {
            #expect(try !m.pendingUpload(m.mountpoint + "/" + path), "\(path) uploaded")
        }
        let clean = try m.mamfs(["provider", "sync", m.backing], check: false)
        #expect(clean.status == 0 && clean.out.contains("no changes"), "\(clean.out) \(clean.err)")
        try m.expectRemoteMatchesMount("after provider sync")
        #expect(try m.mamfs(["provider", "evict", m.mountpoint + "/offline.txt"], check: false).status == 0)
    }

    @Test("non-replicated: a pending upload left by a mount is pushed by the next mount")
    func remountFlushesPendingUploads() throws {
        let m = try ProviderMount("non-replicated")
        defer { m.close() }
        let away = m.remote + ".away"
        #expect(rename(m.remote, away) == 0)
        #expect(try m.sh("printf 'later\\n' > \"$M/later.txt\"").status == 0)
        #expect(m.wait(5) { ((try? String(contentsOfFile: m.log, encoding: .utf8)) ?? "").contains("not uploaded") })
        m.close()
        #expect(rename(away, m.remote) == 0)
        let again = try ProviderMount(reopening: m)
        defer { again.close() }
        #expect(again.read(again.remote + "/later.txt") == Data("later\n".utf8))
        #expect(try !again.pendingUpload(again.mountpoint + "/later.txt"))
        try again.expectRemoteMatchesMount("after remount")
    }
}
