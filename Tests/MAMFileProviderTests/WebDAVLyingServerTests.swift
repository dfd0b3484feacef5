import Foundation
import Glibc
import Testing
import MAMFileProvider
import MAMProtection
import MAMTestSupport

/// What a WebDAV server that lies gets from the store: a short or cut-off GET of the listed
/// version, or one longer than the listing, is an error with nothing taken (the sync records
/// nothing and asks again next time); an impossible listed length is no length at all, never a
/// size that overflows a sum; another client's write listed right after an upload is not taken
/// for the upload's own version.
@Suite("WebDAV: a server that lies")
struct WebDAVLyingServerTests {
    static let text = "the whole file, forty-five bytes long, really\n"

    /// GETs `name` from `server` into a fresh file; the item, or the error.
    static func fetch(_ server: LyingDAVServer, _ name: String) throws -> (Result<RemoteItem, Error>, [UInt8]) {
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        let directory = try TempDirectory(prefix: "mamfs-lyingdav-get")
        let destination = URL(fileURLWithPath: directory.file("got"))
        FileManager.default.createFile(atPath: destination.path, contents: nil)
        let result = Result { try store.readContents(of: ItemIdentifier(name), into: destination) }
        return (result, [UInt8]((try? Data(contentsOf: destination)) ?? Data()))
    }

    @Test("a GET shorter than the listing (with or without a Content-Length) is an error naming both lengths")
    func shortGetIsAnError() throws {
        var short = LyingDAVServer.File(Self.text, etag: "\"e1\"")
        short.getBody = String(Self.text.prefix(10))
        var cut = short
        cut.contentLength = false
        let server = try LyingDAVServer(files: ["short.txt": short, "cut.txt": cut, "honest.txt": .init(Self.text, etag: "\"e2\"")])
        for name in ["short.txt", "cut.txt"] {
            let (result, _) = try Self.fetch(server, name)
            #expect(throws: RemoteError.self) { try result.get() }
            if case .failure(let error) = result {
                #expect("\(error)".contains("sent 10 bytes where its listing gives \(Self.text.utf8.count)"), "\(name): \(error)")
            }
        }
        let (honest, bytes) = try Self.fetch(server, "honest.txt")
        #expect(try honest.get().size == Int64(Self.text.utf8.count))
        #expect(bytes == Array(Self.text.utf8))
    }

    @Test("a GET longer than the listing is cut off at the listed length and is an error")
    func longGetIsCutOff() throws {
        var long = LyingDAVServer.File(Self.text, etag: "\"e1\"")
        long.getBody = String(repeating: "x", count: 4 << 20)
        let server = try LyingDAVServer(files: ["long.txt": long])
        let (result, bytes) = try Self.fetch(server, "long.txt")
        #expect(throws: RemoteError.self) { try result.get() }
        #expect(bytes.count <= Self.text.utf8.count, "no more than the listed length was written: \(bytes.count)")
    }

    @Test("a negative or impossibly large listed length is no length: listed as 0, the GET's bytes are the file")
    func impossibleLengthsAreUnknown() throws {
        var huge = LyingDAVServer.File(Self.text, etag: "\"e1\"")
        huge.length = "9223372036854775807"
        var negative = LyingDAVServer.File(Self.text, etag: "\"e2\"")
        negative.length = "-1"
        let server = try LyingDAVServer(files: ["huge.txt": huge, "negative.txt": negative])
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        let listed = try store.enumerate(container: .rootContainer)
        #expect(listed.map(\.size).sorted() == [0, 0], "\(listed.map { ($0.filename, $0.size) })")
        for name in ["huge.txt", "negative.txt"] {
            let (result, bytes) = try Self.fetch(server, name)
            #expect(try result.get().size == Int64(Self.text.utf8.count), "\(name)")
            #expect(bytes == Array(Self.text.utf8), "\(name)")
        }
    }

    @Test("after an upload the store keeps the version the PUT's reply gave, not another client's write listed after it")
    func uploadKeepsThePutsVersion() throws {
        var file = LyingDAVServer.File(Self.text, etag: "\"e1\"")
        file.afterPut = "OTHER CLIENT'S EDIT\n"
        let server = try LyingDAVServer(files: ["f.txt": file])
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        let directory = try TempDirectory(prefix: "mamfs-lyingdav-put")
        let local = URL(fileURLWithPath: directory.file("f"))
        try Data("my edit\n".utf8).write(to: local)
        let modified = try store.modify(ItemIdentifier("f.txt"), baseVersion: "\"e1\"", contentsURL: local)
        #expect(modified.version.contentVersion == "\"put-1\"")
        // The next look sees a version that is not ours: the other client's write is a change.
        #expect(try store.item(ItemIdentifier("f.txt")).version.contentVersion == "\"other-1\"")
    }

    @Test("an endless tree whose collections are listed twice is refused after 1,025 levels, each collection listed once")
    func endlessTreeIsRefused() throws {
        let server = try LyingDAVServer.endless()
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        #expect(throws: RemoteError.self) { _ = try store.enumerateTree() }
        let listed = server.propfinds
        #expect(listed.count <= 1_026, "PROPFINDs: \(listed.count)")
        #expect(Set(listed).count == listed.count, "a collection listed twice")
    }

    @Test("a listing that is not WebDAV stops a pass with 74 and says so, not 75 ('run it again'); 502, 503 and 504 are 75",
          arguments: [(200, ExitCode.ioErr), (207, ExitCode.ioErr), (500, ExitCode.ioErr), (502, ExitCode.tempFail),
                      (503, ExitCode.tempFail), (504, ExitCode.tempFail)])
    func listingThatIsNotWebDAV(status: Int, expected: ExitCode) throws {
        let server = try LyingDAVServer.answeringListings(status, "<html><body>a web page, not a WebDAV collection</body></html>")
        let f = try ProviderFixture(remoteKind: .local)
        try f.write(f.localPath("kept.txt"), Array("kept".utf8))
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        let placeholders = try f.nonReplicated(remote: store).createPlaceholders()
        let synced = try f.replicated(remote: store, localRoot: f.root + "/replica").syncOnce()
        for report in [placeholders, synced] {
            #expect(!report.complete && report.exitCode == expected, "\(report)")
            let said = report.errors.first?.message ?? ""
            #expect(status == 207 ? said.contains("not a WebDAV multistatus") : said.contains("HTTP \(status)"), "\(said)")
        }
        #expect(try f.read(f.localPath("kept.txt")) == Array("kept".utf8), "nothing local is touched")
    }

    @Test("a PUT answered 502, 503 or 504 finds the remote unreachable (the change waits and is retried); 500 is a failure",
          arguments: [(500, false), (502, true), (503, true), (504, true)])
    func putOfAServerThatIsDown(status: Int, unreachable: Bool) throws {
        var file = LyingDAVServer.File(Self.text, etag: "\"e1\"")
        file.putStatus = status
        let server = try LyingDAVServer(files: ["f.txt": file])
        let store = try WebDAVRemote(baseURL: server.baseURL, credentials: nil)
        let directory = try TempDirectory(prefix: "mamfs-lyingdav-put")
        let local = URL(fileURLWithPath: directory.file("f"))
        try Data("my edit\n".utf8).write(to: local)
        let result = Result { try store.modify(ItemIdentifier("f.txt"), baseVersion: "\"e1\"", contentsURL: local) }
        switch result {
        case .failure(RemoteError.unreachable(let said)): #expect(unreachable && said.contains("HTTP \(status)"), "\(said)")
        case .failure(RemoteError.failed(let said)): #expect(!unreachable && said.contains("HTTP \(status)"), "\(said)")
        default: Issue.record("\(result)")
        }
        #expect(try store.item(ItemIdentifier("f.txt")).version.contentVersion == "\"e1\"", "nothing was stored")
    }
}

