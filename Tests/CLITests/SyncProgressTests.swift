import Foundation
import Testing
import MAMTestSupport

/// A tree of 300 files of known, different sizes in 6 directories (306 items, 3,072,000
/// bytes), written into `directory`.
private enum KnownTree {
    static let directories = 6
    static let filesPerDirectory = 50
    static let items = directories * (filesPerDirectory + 1)
    static let bytes: Int64 = 3_072_000

    /// Sizes 8,240...12,240 bytes around 10,240, summing to `bytes`.
    static func size(_ index: Int) -> Int { 10_240 + (index % 5 - 2) * 1_000 }

    /// Relative path -> contents.
    static var files: [String: Data] {
        var files: [String: Data] = [:]
        for index in 0..<(directories * filesPerDirectory) {
            let data = Fixtures.binary(size(index) - 256)
            files["d\(index % directories)/f\(index).bin"] = data
        }
        return files
    }

    static func write(into directory: String) throws {
        for (relative, data) in files {
            let path = directory + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: path))
        }
    }
}

/// The JSON lines of a `provider sync --json` run, checked line by line.
private struct SyncLines {
    var progress: [[String: Any]] = []
    var done: [String: Any] = [:]

    init(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let lines = result.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.last == "", "the output ends with a newline", sourceLocation: sourceLocation)
        for (index, line) in lines.dropLast().enumerated() {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("line \(index) is not a JSON object: \(line)", sourceLocation: sourceLocation)
                continue
            }
            switch object["event"] as? String {
            case "progress":
                #expect(done.isEmpty, "no progress after done", sourceLocation: sourceLocation)
                progress.append(object)
            case "done":
                #expect(done.isEmpty, "one done event", sourceLocation: sourceLocation)
                done = object
            default:
                Issue.record("unknown event in \(line)", sourceLocation: sourceLocation)
            }
        }
    }

    static func int(_ object: [String: Any], _ key: String) -> Int64 { (object[key] as? NSNumber)?.int64Value ?? -1 }

    /// Items and bytes never go down, totals are never below them, every key is there.
    func expectMonotonic(sourceLocation: SourceLocation = #_sourceLocation) {
        var items: Int64 = 0
        var bytes: Int64 = 0
        for object in progress {
            for key in ["items", "itemsTotal", "bytes", "bytesTotal", "bytesPerSecond", "etaSeconds", "path"] {
                #expect(object[key] != nil, "progress has \(key): \(object)", sourceLocation: sourceLocation)
            }
            let nowItems = Self.int(object, "items")
            let nowBytes = Self.int(object, "bytes")
            #expect(nowItems >= items && nowBytes >= bytes, "went down: \(object)", sourceLocation: sourceLocation)
            #expect(Self.int(object, "itemsTotal") >= nowItems && Self.int(object, "bytesTotal") >= nowBytes,
                    "total below done: \(object)", sourceLocation: sourceLocation)
            #expect(object["etaSeconds"] is NSNull || object["etaSeconds"] is NSNumber, sourceLocation: sourceLocation)
            items = nowItems
            bytes = nowBytes
        }
    }

    /// The last progress line and the done line give exactly `items` and `bytes`.
    func expectFinal(items: Int64, bytes: Int64, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let last = progress.last else {
            Issue.record("no progress line", sourceLocation: sourceLocation)
            return
        }
        for object in [last, done] {
            #expect(Self.int(object, "items") == items && Self.int(object, "itemsTotal") == items,
                    "items of \(object)", sourceLocation: sourceLocation)
            #expect(Self.int(object, "bytes") == bytes && Self.int(object, "bytesTotal") == bytes,
                    "bytes of \(object)", sourceLocation: sourceLocation)
        }
        #expect(last["etaSeconds"] as? NSNumber == 0, sourceLocation: sourceLocation)
    }
}

/// A sandbox with the demo account enrolled, a local root and a remote directory, the known
/// tree written into one of them and the other empty.
private struct TreeSandbox {
    enum Side { case local, remote }
    let sandbox: Sandbox
    let local: String
    let remote: String

    init(treeOn side: Side) throws {
        sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        local = sandbox.path("local")
        remote = sandbox.path("remote")
        try KnownTree.write(into: side == .local ? local : remote)
        try FileManager.default.createDirectory(atPath: side == .local ? remote : local, withIntermediateDirectories: true)
    }
}

@Suite("CLI: provider sync progress (terminal line, --json lines)")
struct SyncProgressTests {
    @Test("--json, replicated first sync up: every line parses, items and bytes never go down, the last progress and done give the tree's 306 items and 3,072,000 bytes")
    func jsonReplicatedUp() throws {
        let t = try TreeSandbox(treeOn: .local)
        let (sandbox, local, remote) = (t.sandbox, t.local, t.remote)
        let result = try sandbox.run(["provider", "sync", local, "--remote", remote, "--json"])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.stderr.isEmpty, "\(result.err)")
        let lines = try SyncLines(result)
        lines.expectMonotonic()
        lines.expectFinal(items: Int64(KnownTree.items), bytes: KnownTree.bytes)
        #expect(lines.progress.count >= 2, "a first line at once and a last one")
        #expect(SyncLines.int(lines.done, "created") == Int64(KnownTree.items))
        #expect(SyncLines.int(lines.done, "exitCode") == 0)
        #expect(lines.done["complete"] as? Bool == true)
        #expect((lines.done["errors"] as? [Any])?.isEmpty == true)
        for (relative, data) in KnownTree.files {
            #expect(try sandbox.read(remote + "/" + relative) == data, "\(relative) on the remote")
        }

        let again = try sandbox.run(["provider", "sync", local, "--json"])
        #expect(again.status == 0, "\(again.err)")
        let quiet = try SyncLines(again)
        quiet.expectMonotonic()
        #expect(SyncLines.int(quiet.done, "bytes") == 0 && SyncLines.int(quiet.progress.last ?? [:], "bytesTotal") == 0,
                "nothing moves on a second pass")
        #expect(SyncLines.int(quiet.done, "items") == Int64(KnownTree.items), "every known item is looked at")
    }

    @Test("--json, replicated first sync down for the managed account (encrypted copies): bytes are the plain bytes fetched; an encrypted replica synced up to a new remote counts plain bytes too")
    func jsonReplicatedDownEncrypted() throws {
        let t = try TreeSandbox(treeOn: .remote)
        let (sandbox, local, remote) = (t.sandbox, t.local, t.remote)
        let result = try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn, "--json"])
        #expect(result.status == 0, "\(result.err)")
        let lines = try SyncLines(result)
        lines.expectMonotonic()
        lines.expectFinal(items: Int64(KnownTree.items), bytes: KnownTree.bytes)
        #expect(SyncLines.int(lines.done, "fetched") == Int64(KnownTree.items))
        let info = try jsonArray(try sandbox.run(["info", "--json", local + "/d0/f0.bin"]))
        #expect(info.first?["encrypted"] as? Bool == true)

        // The replica's files are encrypted (their stat sizes are larger than the plain bytes):
        // a copy of it bound to a new, empty remote uploads, and counts, the plain bytes.
        let copy = sandbox.path("copy")
        let fresh = sandbox.path("fresh-remote")
        try FileManager.default.createDirectory(atPath: fresh, withIntermediateDirectories: true)
        #expect(try runProcess("/bin/cp", ["-a", local, copy], environment: sandbox.environment).status == 0)
        #expect(try runProcess("/bin/rm", ["-rf", copy + "/.mamfs-provider"], environment: sandbox.environment).status == 0)
        let up = try sandbox.run(["provider", "sync", copy, "--remote", fresh, "--account", Fixtures.upn, "--json"])
        #expect(up.status == 0, "\(up.err)")
        let upLines = try SyncLines(up)
        upLines.expectMonotonic()
        upLines.expectFinal(items: Int64(KnownTree.items), bytes: KnownTree.bytes)
        #expect(SyncLines.int(upLines.progress.first ?? [:], "bytesTotal") > KnownTree.bytes,
                "expected from the stat sizes of the encrypted files first")
        #expect(try sandbox.read(fresh + "/d1/f1.bin") == KnownTree.files["d1/f1.bin"])
    }

    @Test("without --json and with stderr a pipe: no progress line, one summary line on stdout")
    func pipeIsQuiet() throws {
        let t = try TreeSandbox(treeOn: .remote)
        let (sandbox, local, remote) = (t.sandbox, t.local, t.remote)
        let result = try sandbox.run(["provider", "sync", local, "--remote", remote])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.stderr.isEmpty, "\(result.err)")
        #expect(result.out == "Synced \(local): \(KnownTree.items) fetched\n")
    }

    @Test("on a pseudo-terminal the line shows items and bytes, is redrawn in place and ends with the totals; stdout keeps the summary",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func terminalLine() throws {
        let t = try TreeSandbox(treeOn: .remote)
        let (sandbox, local, remote) = (t.sandbox, t.local, t.remote)
        let command = [MamfsBinary.path, "provider", "sync", local, "--remote", remote, "--state", sandbox.state]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        // script(1) runs the command on a new pseudo-terminal and copies what it writes to stdout.
        let result = try runProcess("/usr/bin/script", ["-qec", command, "/dev/null"], environment: sandbox.environment)
        #expect(result.status == 0, "\(result.out)\(result.err)")
        let text = result.out
        let prefix = "mamfs: provider sync: "
        #expect(text.contains("\r\u{1B}[K" + prefix), "redrawn in place: \(text.suffix(400))")
        // Each drawing fits the terminal (80 columns when it does not say), so "\r" redraws it whole.
        // (The terminal turns "\n" into "\r\n".)
        let drawings = text.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\r\u{1B}[K").dropFirst().map { $0.components(separatedBy: "\n")[0] }
        #expect(drawings.count >= 2)
        for drawing in drawings { #expect(drawing.count < 80, "\(drawing)") }
        #expect(text.contains(prefix + "306/306 items, 2.9/2.9 MiB, "), "the last line has the totals: \(text.suffix(400))")
        #expect(text.contains(", ETA 0:00"), "\(text.suffix(400))")
        #expect(text.contains("Synced \(local): 306 fetched"))
        #expect(!text.contains("\"event\""))
    }

    @Test("--json, non-replicated root (made by a mount): uploads then the placeholder refresh in one monotonic count; done gives the 300 uploads and their bytes",
          .enabled(if: fuseUsable))
    func jsonNonReplicated() throws {
        let (sandbox, backing, mountpoint) = try MountTests.mountSandbox()
        defer { MountTests.forceUnmount(mountpoint) }
        let remote = sandbox.path("remote")
        try FileManager.default.createDirectory(atPath: remote, withIntermediateDirectories: true)
        let mount = try sandbox.run(["mount", backing, mountpoint, "--remote", remote, "--provider", "non-replicated"])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0 else { return }
        #expect(try sandbox.run(["unmount", mountpoint]).status == 0)
        // Files made in the backing directory while nothing is mounted: local changes to upload.
        try KnownTree.write(into: backing)
        let files = Int64(KnownTree.directories * KnownTree.filesPerDirectory)
        let result = try sandbox.run(["provider", "sync", backing, "--json"])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.stderr.isEmpty, "\(result.err)")
        let lines = try SyncLines(result)
        lines.expectMonotonic()
        // Items: the 300 uploads, then the refresh looks at every remote item (300 files, 6 directories).
        lines.expectFinal(items: files + Int64(KnownTree.items), bytes: KnownTree.bytes)
        #expect(SyncLines.int(lines.done, "created") == files)
        for (relative, data) in KnownTree.files {
            #expect(try sandbox.read(remote + "/" + relative) == data, "\(relative) on the remote")
        }
    }

    @Test("--json keeps the exit codes: a vanished remote exits 75 with a done line saying so (incomplete, the error listed)")
    func jsonUnreachable() throws {
        let t = try TreeSandbox(treeOn: .remote)
        #expect(try t.sandbox.run(["provider", "sync", t.local, "--remote", t.remote]).status == 0)
        #expect(rename(t.remote, t.remote + ".gone") == 0)
        let result = try t.sandbox.run(["provider", "sync", t.local, "--json"])
        #expect(result.status == 75, "\(result.err)")
        #expect(!result.errLines.isEmpty, "the error is reported on stderr too")
        let lines = try SyncLines(result)
        lines.expectMonotonic()
        #expect(lines.progress.count == 1, "the last progress line, even with nothing done")
        #expect(SyncLines.int(lines.done, "exitCode") == 75)
        #expect(lines.done["complete"] as? Bool == false)
        let errors = lines.done["errors"] as? [[String: Any]]
        #expect(errors?.count == 1 && errors?.first?["path"] as? String == "" && (errors?.first?["errno"] as? NSNumber)?.int32Value == EHOSTUNREACH,
                "\(String(describing: errors))")
    }

    @Test("--json: a root with no remote yet is still a usage error (64), with no done line")
    func jsonUsageError() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let local = sandbox.path("local")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        let result = try sandbox.run(["provider", "sync", local, "--json"])
        #expect(result.status == 64, "\(result.err)")
        #expect(!result.out.contains("\"done\""))
    }
}
