import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// The WebDAV server killed while a provider uploads through it (`ServerKillDuringUpload`),
/// then started again: every file arrives once with its bytes, nothing partial or temporary
/// stays on the server, no conflict copy is made, the local files stay as they were.
@Suite("File providers on a WebDAV server killed in the middle of an upload",
       .enabled(if: ProviderMount.fuseUsable && ApacheDAVServer.isAvailable, "needs /dev/fuse and apache2 (make deps installs it)"),
       .serialized)
struct WebDAVInterruptedUploadTests {
    /// The files each scenario writes: a few small ones and one of 6 MiB, which is the one
    /// being uploaded when the server is killed (the kill waits for 1 MiB of it on the server).
    private static let written: [(name: String, bytes: Data)] = [
        ("small-1.txt", Data("the first small file\n".utf8)),
        ("large.bin", Data(randomBytes(6 << 20, seed: 0xdead))),
        ("small-2.txt", Data("the second small file\n".utf8)),
        ("small-3.bin", Data(randomBytes(40_000, seed: 7))),
    ]
    private static let killThreshold: Int64 = 1 << 20

    private func sha256(_ path: String) throws -> String {
        let result = try shell("sha256sum < \(shellQuote(path)) | cut -d' ' -f1")
        return result.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func sha256(_ data: Data, _ scratch: String) throws -> String {
        try data.write(to: URL(fileURLWithPath: scratch))
        defer { unlink(scratch) }
        return try sha256(scratch)
    }

    /// The server holds each written file exactly once, under its name, with its bytes;
    /// besides the remote's first tree nothing else is there (no partial, temporary or
    /// conflict-copy name), and nothing starts with the protected-file magic. Apache's own
    /// temp file of the PUT it was killed in (`.davfs.tmp*`, mod_dav_fs writes a PUT there and
    /// renames it when complete) stays in its directory, as after any crash of the server: it
    /// is not ours to remove, and the server never lists it, so it must not show locally.
    private func expectDeliveredOnce(_ m: ProviderMount, before: Set<String>, _ what: String,
                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        let now = Set(regularFiles(under: m.remote))
        let added = now.subtracting(before).filter { !$0.hasPrefix(".davfs.tmp") }
        #expect(added == Set(Self.written.map(\.name)), "\(what): files on the server besides the first tree: \(added.sorted())",
                sourceLocation: sourceLocation)
        #expect(before.isSubset(of: now), "\(what): files of the first tree are gone", sourceLocation: sourceLocation)
        for (name, bytes) in Self.written {
            #expect(try sha256(m.remote + "/" + name) == sha256(bytes, m.base + "/expected"), "\(what): \(name) on the server",
                    sourceLocation: sourceLocation)
        }
        let leftovers = try shell("find \(shellQuote(m.remote)) -name '*mamfs-tmp*' -o -name '*mamfs-exchange*' -o -name '*conflict*'").out
        #expect(leftovers.isEmpty, "\(what): temporary or conflict names on the server: \(leftovers)", sourceLocation: sourceLocation)
        #expect(m.protectedRemoteFiles().isEmpty, "\(what): header magic on the server", sourceLocation: sourceLocation)
        guard let server = m.server else { return }
        let listing = try shell("curl -sf -X PROPFIND -H 'Depth: 1' -u \(shellQuote(server.user + ":" + server.password)) \(shellQuote(server.baseURL))")
        #expect(listing.status == 0 && listing.out.contains("large.bin") && !listing.out.contains(".davfs"),
                "\(what): the server's listing: \(listing.status)", sourceLocation: sourceLocation)
        let local = regularFiles(under: m.backing).filter { $0.contains(".davfs") || $0.contains("conflict") }
        #expect(local.isEmpty, "\(what): locally: \(local)", sourceLocation: sourceLocation)
    }

    @Test("replicated provider sync with the server killed in the middle of a 6 MiB upload exits 75; after a restart the next sync exits 0: each file on the server once with its SHA-256, no partial or temporary names, no conflict copies, local files unchanged")
    func replicatedSyncServerKilled() throws {
        let m = try ProviderMount("replicated", encrypt: true, syncInterval: 3600, webdav: true)
        defer { m.close() }
        let server = try #require(m.server)
        #expect(m.wait(30) { m.files(under: m.backing).count == m.files(under: m.remote).count }, "the first pass fetched the tree")
        let before = Set(regularFiles(under: m.remote))
        // Written while the server is down, so the mount's own pass cannot take them up.
        server.kill()
        for (name, bytes) in Self.written { try bytes.write(to: URL(fileURLWithPath: m.mountpoint + "/" + name)) }
        m.close()
        var local: [String: Data] = [:]
        for (name, _) in Self.written { local[name] = m.read(m.backing + "/" + name) }
        #expect(try m.backingHeader("large.bin")?.isEncrypted == true, "the local copy is encrypted")
        try server.restart()

        let killer = try ServerKillDuringUpload(server, threshold: Self.killThreshold)
        let interrupted = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile], check: false)
        let killed = killer.stop()
        #expect(killed != nil, "the server was not killed during an upload")
        #expect(interrupted.status == ExitCode.tempFail.rawValue, "\(interrupted.status) \(interrupted.err)")
        #expect(!interrupted.err.contains(server.password))
        // The cut PUT is the remote going away (retry later), not an error of the file.
        #expect(interrupted.err.contains("large.bin") && !interrupted.err.contains("Input/output error"), "\(interrupted.err)")

        try server.restart()
        let resumed = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile], check: false)
        #expect(resumed.status == 0, "\(resumed.status) \(resumed.err)")
        try expectDeliveredOnce(m, before: before, "after the second sync")
        for (name, bytes) in local { #expect(m.read(m.backing + "/" + name) == bytes, "\(name) changed locally") }
        let again = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile], check: false)
        #expect(again.status == 0 && again.out.contains("no changes"), "\(again.out) \(again.err)")
        try expectDeliveredOnce(m, before: before, "after a third sync")
    }

    @Test("non-replicated mount: a file written while the server is killed in the middle of its upload stays queued and is delivered once after the restart, with its SHA-256; no partial or temporary names, no conflict copies")
    func nonReplicatedUploadServerKilled() throws {
        let m = try ProviderMount("non-replicated", encrypt: true, options: ["retry_base=1"], webdav: true)
        defer { m.close() }
        let server = try #require(m.server)
        let before = Set(regularFiles(under: m.remote))
        let killer = try ServerKillDuringUpload(server, threshold: Self.killThreshold, timeout: 30)
        for (name, bytes) in Self.written { try bytes.write(to: URL(fileURLWithPath: m.mountpoint + "/" + name)) }
        let killed = killer.wait()
        #expect(killed != nil, "the server was not killed during an upload")
        #expect(m.wait(10) { (try? m.pendingUpload(m.mountpoint + "/large.bin")) == true }, "the upload is queued")
        // Its row stays in the queue for the retry (not dropped as failed for good).
        let queued = try m.mamfs(["provider", "status", m.mountpoint, "--json"]).out
        let object = try JSONSerialization.jsonObject(with: Data(queued.utf8)) as? [String: Any]
        let entries = (object?["queue"] as? [String: Any])?["entries"] as? [String] ?? []
        #expect(entries.contains { $0.hasSuffix("large.bin") }, "queue: \(queued)")

        try server.restart()
        #expect(m.wait(30) { Self.written.allSatisfy { (try? m.pendingUpload(m.mountpoint + "/" + $0.name)) == false } },
                "the queue was not delivered after the restart")
        try expectDeliveredOnce(m, before: before, "after the restart")
        let logged = (try? String(contentsOfFile: m.log, encoding: .utf8)) ?? ""
        #expect(!logged.contains("not uploaded:"), "an upload was given up (not kept for a retry): \(logged.suffix(2000))")
        for (name, bytes) in Self.written {
            #expect(m.read(m.mountpoint + "/" + name) == bytes, "\(name) in the mount")
            #expect(try m.backingHeader(name)?.isEncrypted == true, "\(name): the local copy is encrypted")
        }
    }
}
