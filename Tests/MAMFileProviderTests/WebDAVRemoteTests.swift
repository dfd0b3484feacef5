import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection
import MAMTestSupport

/// What only the WebDAV store has: authentication, credentials files, the server's refusals.
@Suite("WebDAV remote", .enabled(if: ApacheDAVServer.isAvailable, "apache2 is not installed (make deps installs it)"))
struct WebDAVRemoteTests {
    @Test("a wrong password is .unauthorized (exit 77) and the password is in no message")
    func wrongPassword() throws {
        let server = try ApacheDAVServer()
        let wrong = "wrong-" + server.password
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: RemoteCredentials(user: server.user, password: wrong))
        var caught: RemoteError?
        do { _ = try store.enumerate(container: .rootContainer) } catch let error as RemoteError { caught = error }
        guard case .unauthorized(let message)? = caught else {
            Issue.record("expected .unauthorized, got \(String(describing: caught))")
            return
        }
        #expect(!message.contains(wrong) && !message.contains(server.password))
        #expect(caught?.mamError.exitCode == .noPerm)
        #expect(!(caught?.mamError.description.contains(wrong) ?? true))
        let anonymous = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        #expect {
            try anonymous.item(ItemIdentifier("x"))
        } throws: { error in
            if case RemoteError.unauthorized = error { return true }
            return false
        }
    }

    @Test("symbolic links are refused: WebDAV has none")
    func noSymlinks() throws {
        let server = try ApacheDAVServer()
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: RemoteCredentials(user: server.user, password: server.password))
        #expect(throws: RemoteError.failed("WebDAV has no symbolic links")) {
            try store.create(parent: .rootContainer, name: "link", contents: .symlink("target"))
        }
        #expect(server.files().isEmpty)
    }

    @Test("the version a PUT's reply gives is the one the server lists afterwards (create and modify)")
    func uploadVersionIsTheListedOne() throws {
        let server = try ApacheDAVServer()
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: RemoteCredentials(user: server.user, password: server.password))
        let scratch = try TempDirectory(prefix: "mamfs-dav")
        let file = URL(fileURLWithPath: scratch.file("f"))
        try Data("first\n".utf8).write(to: file)
        let created = try store.create(parent: .rootContainer, name: "f.txt", contents: .file(file))
        #expect(try store.item(ItemIdentifier("f.txt")).version == created.version)
        try Data("second, longer\n".utf8).write(to: file)
        let modified = try store.modify(ItemIdentifier("f.txt"), baseVersion: created.version.contentVersion, contentsURL: file)
        #expect(modified.version.contentVersion != created.version.contentVersion)
        #expect(try store.item(ItemIdentifier("f.txt")).version == modified.version)
    }

    @Test("a full server is .insufficientStorage naming the item (exit 74); nothing is left behind")
    func insufficientStorage() throws {
        let server = try ApacheDAVServer()
        let mounted = try shell("mount -t tmpfs -o size=1m,mode=0755 mamfs-dav-full \(shellQuote(server.davDirectory)) 2>&1")
        try #require(mounted.status == 0, "tmpfs: \(mounted.out)")
        defer { _ = try? shell("umount \(shellQuote(server.davDirectory)) || umount -l \(shellQuote(server.davDirectory))") }
        try server.giveToWorkers(server.davDirectory)
        let scratch = try TempDirectory(prefix: "mamfs-dav")
        let big = scratch.file("big")
        try Data(repeating: 0x61, count: 3 << 20).write(to: URL(fileURLWithPath: big))
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: RemoteCredentials(user: server.user, password: server.password))
        #expect(throws: RemoteError.insufficientStorage(ItemIdentifier("big.bin"))) {
            try store.create(parent: .rootContainer, name: "big.bin", contents: .file(URL(fileURLWithPath: big)))
        }
        #expect(RemoteError.insufficientStorage(ItemIdentifier("big.bin")).mamError.exitCode == .ioErr)
        #expect(RemoteError.insufficientStorage(ItemIdentifier("big.bin")).description.contains("big.bin"))
    }

    @Test("plain http is refused to a host that is not loopback; https and loopback http are accepted")
    func plainHTTPOnlyToLoopback() throws {
        #expect(throws: MAMError.self) { try WebDAVRemote(baseURL: "http://dav.example.com/dav/", credentials: nil) }
        #expect(throws: MAMError.self) { try WebDAVRemote(baseURL: "http://user:pw@127.0.0.1/dav/", credentials: nil) }
        #expect(throws: MAMError.self) { try WebDAVRemote(baseURL: "ftp://127.0.0.1/dav/", credentials: nil) }
        _ = try WebDAVRemote(baseURL: "https://dav.example.com/dav/", credentials: nil)
        _ = try WebDAVRemote(baseURL: "http://127.0.0.1:8080/dav/", credentials: nil)
        _ = try WebDAVRemote(baseURL: "http://[::1]:8080/dav", credentials: nil)
    }

    @Test("a credentials file must be 0600 and the caller's; its entry for the host is used; the password is in no error")
    func credentialsFile() throws {
        let scratch = try TempDirectory(prefix: "mamfs-dav")
        let path = scratch.file("netrc")
        let secret = "p@ss word-\(UUID().uuidString)"
        try Data("machine other.example login bob password nope\nmachine 127.0.0.1\n  login alice\n  password \(secret.replacingOccurrences(of: " ", with: "_"))\n".utf8)
            .write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        var caught: MAMError?
        do { _ = try RemoteCredentials.load(netrc: path, host: "127.0.0.1") } catch let error as MAMError { caught = error }
        #expect(caught?.exitCode == .noPerm)
        #expect(caught?.description.contains("0644") == true)
        #expect(!(caught?.description.contains("nope") ?? true))
        chmod(path, 0o600)
        let loaded = try RemoteCredentials.load(netrc: path, host: "127.0.0.1")
        #expect(loaded == RemoteCredentials(user: "alice", password: secret.replacingOccurrences(of: " ", with: "_")))
        #expect(!String(describing: loaded as Any).contains("p@ss"))
        #expect(try RemoteCredentials.load(netrc: path, host: "dav.example.com") == nil)
        let link = scratch.file("link")
        symlink(path, link)
        #expect(throws: MAMError.self) { try RemoteCredentials.load(netrc: link, host: "127.0.0.1") }
        #expect(RemoteCredentials.fromEnvironment(["MAMFS_REMOTE_USER": "u", "MAMFS_REMOTE_PASSWORD": "p"]) == RemoteCredentials(user: "u", password: "p"))
        #expect(RemoteCredentials.fromEnvironment(["MAMFS_REMOTE_USER": "u"]) == nil)
    }
}
