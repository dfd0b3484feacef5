import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// A 256 MiB file through a provider mount on a WebDAV server: up and down again with the
/// daemon's memory bounded, so neither transfer holds the file (or a large part of it).
@Suite("A 256 MiB file through a provider mount on a WebDAV server",
       .enabled(if: ProviderMount.fuseUsable && ApacheDAVServer.isAvailable, "needs /dev/fuse and apache2 (make deps installs it)"),
       .serialized)
struct WebDAVLargeFileMountTests {
    static let size = 256 << 20
    /// The most the daemon may ever have resident (VmHWM), in bytes.
    static let residentLimit = 96 << 20

    private func sha256(_ path: String) throws -> String {
        let result = try shell("sha256sum < \(shellQuote(path)) | cut -d' ' -f1", timeout: 120)
        #expect(result.status == 0, "sha256sum \(path): \(result.err)")
        return result.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The peak resident set (VmHWM of /proc/PID/status) of the processes serving the mount, in bytes.
    private func daemonPeakResident(_ pids: [pid_t]) -> Int {
        pids.map { pid -> Int in
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                  let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                  let kb = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
            return kb * 1024
        }.max() ?? 0
    }

    /// Finds the daemon, makes a 256 MiB source file of random bytes, copies it into the mount
    /// as large.bin and waits until the server holds it, with the source's SHA-256.
    /// - Returns: the daemon's PIDs, the source's path and its SHA-256.
    private func writeAndUpload(_ m: ProviderMount, sourceLocation: SourceLocation = #_sourceLocation) throws -> ([pid_t], String, String) {
        let daemons = FuseMounts.daemonPIDs(serving: m.mountpoint)
        try #require(!daemons.isEmpty, "no daemon found", sourceLocation: sourceLocation)
        let source = m.base + "/source.bin"
        #expect(try shell("head -c \(Self.size) /dev/urandom > \(shellQuote(source))", timeout: 60).status == 0, sourceLocation: sourceLocation)
        let expected = try sha256(source)
        let copied = try shell("cp \(shellQuote(source)) \(shellQuote(m.mountpoint + "/large.bin"))", timeout: 120)
        #expect(copied.status == 0, "\(copied.err)", sourceLocation: sourceLocation)
        #expect(m.wait(120) { m.files(under: m.remote)["large.bin"] == Self.size && (try? m.pendingUpload(m.mountpoint + "/large.bin")) == false },
                "the upload did not finish", sourceLocation: sourceLocation)
        #expect(try sha256(m.remote + "/large.bin") == expected, "the server's bytes", sourceLocation: sourceLocation)
        return (daemons, source, expected)
    }

    @Test("non-replicated: a 256 MiB file written in the mount is uploaded, then evicted and read back through a fresh placeholder download with the same SHA-256; the daemon's VmHWM stays below 96 MiB")
    func nonReplicated() throws {
        let m = try ProviderMount("non-replicated", encrypt: true, webdav: true)
        defer { m.close() }
        let (daemons, _, expected) = try writeAndUpload(m)
        #expect(m.protectedRemoteFiles().isEmpty, "header magic on the server")

        let evicted = try m.mamfs(["provider", "evict", m.mountpoint + "/large.bin"], check: false)
        #expect(evicted.status == 0, "\(evicted.err)")
        #expect(m.files(under: m.backing)["large.bin"] == 0, "a placeholder again")
        #expect(try sha256(m.mountpoint + "/large.bin") == expected, "read back through the download")
        #expect(try m.backingHeader("large.bin")?.isEncrypted == true)
        let peak = daemonPeakResident(daemons)
        #expect(peak > 0 && peak < Self.residentLimit, "the daemon's VmHWM was \(peak >> 20) MiB")
    }

    @Test("replicated: a 256 MiB file written in the mount goes up in a sync pass, and a 256 MiB file put on the server comes down in the next one, both with their SHA-256; the daemon's VmHWM stays below 96 MiB")
    func replicated() throws {
        let m = try ProviderMount("replicated", encrypt: true, syncInterval: 1, webdav: true)
        defer { m.close() }
        let server = try #require(m.server)
        let (daemons, source, expected) = try writeAndUpload(m)

        // The same bytes under another name, put on the server by another client.
        let incoming = server.root.file("incoming")
        let put = try shell("cp \(shellQuote(source)) \(shellQuote(incoming)) && chown www-data:www-data \(shellQuote(incoming)) && mv \(shellQuote(incoming)) \(shellQuote(server.davDirectory + "/from-server.bin"))", timeout: 60)
        #expect(put.status == 0, "\(put.err)")
        #expect(m.wait(120) { m.files(under: m.backing)["from-server.bin"] ?? 0 >= Self.size }, "the download did not arrive")
        #expect(try sha256(m.mountpoint + "/from-server.bin") == expected, "the downloaded bytes")
        #expect(try m.backingHeader("from-server.bin")?.isEncrypted == true)
        #expect(m.protectedRemoteFiles().isEmpty, "header magic on the server")
        let peak = daemonPeakResident(daemons)
        #expect(peak > 0 && peak < Self.residentLimit, "the daemon's VmHWM was \(peak >> 20) MiB")
    }
}
