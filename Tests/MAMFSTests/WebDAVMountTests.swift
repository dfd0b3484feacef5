import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// Provider mounts whose remote is a real Apache WebDAV server (`--remote http://127.0.0.1:PORT/dav/`).
@Suite("File providers on a WebDAV server through the mount",
       .enabled(if: ProviderMount.fuseUsable && ApacheDAVServer.isAvailable, "needs /dev/fuse and apache2 (make deps installs it)"),
       .serialized)
struct WebDAVMountTests {
    @Test("the server's tree appears in the mount; a file written in the mount reaches the server as plain bytes; a file put on the server appears after provider sync; nothing on the server carries the header magic, no log holds the password",
          arguments: ["non-replicated", "replicated"])
    func mountOnWebDAV(kind: String) throws {
        let m = try ProviderMount(kind, encrypt: true, webdav: true)
        defer { m.close() }
        guard let server = m.server else { throw TestSupportError("no server") }
        #expect(m.files(under: m.mountpoint) == m.files(under: m.remote), "names and sizes in the mount")
        let first = try #require(m.someRemoteFiles(1).first)
        #expect(m.read(m.mountpoint + "/" + first) == m.read(m.remote + "/" + first), "a provided file reads as the server's bytes")

        let phrase = "written in the \(kind) mount \(UUID().uuidString)\n"
        try Data(phrase.utf8).write(to: URL(fileURLWithPath: m.mountpoint + "/from-mount.txt"))
        if kind == "non-replicated" { _ = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile]) }
        #expect(m.wait { m.read(m.remote + "/from-mount.txt") == Data(phrase.utf8) }, "the server has the plain bytes")
        let fetched = try shell("curl -sf -u \(shellQuote(server.user + ":" + server.password)) \(shellQuote(server.baseURL + "from-mount.txt"))")
        #expect(fetched.out == phrase, "a GET from the server returns the plain bytes")
        #expect(try m.backingHeader("from-mount.txt") != nil, "the backing copy is encrypted")

        try server.write("from-server.txt", Array("put on the server\n".utf8))
        let synced = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile])
        #expect(synced.status == 0, "\(synced.err)")
        #expect(m.wait { m.read(m.mountpoint + "/from-server.txt") == Data("put on the server\n".utf8) }, "the server's new file is in the mount")

        #expect(m.protectedRemoteFiles().isEmpty, "header magic on the server")
        m.close()
        let logged = (try? String(contentsOfFile: m.log, encoding: .utf8)) ?? ""
        #expect(!logged.contains(server.password) && !synced.err.contains(server.password) && !synced.out.contains(server.password))
    }

    @Test("provider sync exits 77 for a wrong password, 75 for a server that is down, and names no password")
    func syncExitCodes() throws {
        let m = try ProviderMount("non-replicated", encrypt: true, webdav: true)
        defer { m.close() }
        guard let server = m.server else { throw TestSupportError("no server") }
        m.close()
        let wrong = m.base + "/wrong"
        try Data("machine 127.0.0.1 login \(server.user) password not-\(server.password)\n".utf8).write(to: URL(fileURLWithPath: wrong))
        chmod(wrong, 0o600)
        let refused = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", wrong], check: false)
        #expect(refused.status == ExitCode.noPerm.rawValue, "\(refused.err)")
        #expect(!refused.err.contains("not-\(server.password)"))
        chmod(wrong, 0o644)
        let unsafe = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", wrong], check: false)
        #expect(unsafe.status == ExitCode.noPerm.rawValue && unsafe.err.contains("0644"), "\(unsafe.err)")
        server.kill()
        let down = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile], check: false)
        #expect(down.status == ExitCode.tempFail.rawValue, "\(down.err)")
        try server.restart()
        let back = try m.mamfs(["provider", "sync", m.backing, "--remote-credentials", m.credentialsFile], check: false)
        #expect(back.status == 0, "\(back.err)")
    }
}
