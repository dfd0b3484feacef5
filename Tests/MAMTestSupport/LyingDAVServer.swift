import Foundation
import Glibc

/// A WebDAV server that lies on purpose, for tests of what a hostile or broken remote can do:
/// a small Python `http.server` on 127.0.0.1 serving a flat collection `/dav/` from a JSON
/// script of files, each with what its PROPFIND says (`etag`, `length`: any text, so negative
/// or huge lengths too) and what its GET sends (`body`, or `getBody` instead; `contentLength`
/// false to send none and close the connection after the bytes, as a server dying mid-transfer
/// looks; `getDelay` to answer late); a PUT may be followed by another client's write
/// (`afterPut`) or refused (`putStatus`). No authentication. Stopped by its PID by `stop()` and deinit.
public final class LyingDAVServer: @unchecked Sendable {
    /// One file of the collection.
    public struct File: Codable, Sendable {
        public var body: String
        public var etag: String
        public var length: String
        public var getBody: String?
        public var contentLength = true
        /// The ETag a PUT's reply gives (`"put-1"` when nil).
        public var putETag: String?
        /// After a PUT, the file lists with this body and ETag `"other-1"` instead of what was
        /// sent (another client's write in between).
        public var afterPut: String?
        /// The status every PUT of the file is answered with instead (nothing is stored).
        public var putStatus: Int?
        /// Seconds a GET of the file waits before it answers (a slow server or link).
        public var getDelay: Double?

        /// A file whose listing and GET agree with `body`, unless changed after.
        public init(_ body: String, etag: String) {
            self.body = body
            self.etag = etag
            self.length = "\(body.utf8.count)"
        }
    }

    static let script = #"""
    import ctypes, http.server, json, socketserver, sys
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: gone with a test process that is killed
    files = json.load(open(sys.argv[1]))
    endless = files.pop("__endless__", None) is not None
    answer = files.pop("__propfind__", None)
    def response(name, f):
        return ("<d:response><d:href>/dav/%s</d:href><d:propstat><d:prop><d:resourcetype/>"
                "<d:getetag>%s</d:getetag><d:getcontentlength>%s</d:getcontentlength>"
                "<d:getlastmodified>Mon, 07 Dec 2026 00:00:00 GMT</d:getlastmodified></d:prop>"
                "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>") % (name, f["etag"], f["length"])
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *args): pass
        def setup(self):
            super().setup()
            import socket
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle wait per reply
        def do_PROPFIND(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?")[0]
            with open(sys.argv[2] + ".propfinds", "a") as log: log.write(path + "\n")
            if answer is not None:
                data = answer["body"].encode()
                self.send_response(int(answer["etag"])); self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data); return
            if endless and path.endswith("/"):
                # Every collection holds the collection "d/", listed twice: endless and doubling.
                child = ("<d:response><d:href>%sd/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype>"
                         "<d:getetag>\"c\"</d:getetag></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>") % path
                body = child.replace("%sd/" % path, path, 1) + (child * 2 if self.headers.get("Depth") == "1" else "")
            elif path.rstrip("/") == "/dav":
                body = ("<d:response><d:href>/dav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype>"
                        "<d:getetag>\"root\"</d:getetag></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")
                if self.headers.get("Depth") == "1":
                    body += "".join(response(n, f) for n, f in files.items())
            elif path[len("/dav/"):] in files:
                body = response(path[len("/dav/"):], files[path[len("/dav/"):]])
            else:
                self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
            data = ('<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">' + body + "</d:multistatus>").encode()
            self.send_response(207); self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
        def do_PUT(self):
            # Takes the body; replies with `putETag`, then lists `afterPut` (another client's
            # write landing between the PUT and the PROPFIND after it).
            name = self.path[len("/dav/"):]
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            f = files.get(name) or {"body": "", "etag": "\"new\"", "length": "0", "contentLength": True}
            if f.get("putStatus") is not None:
                self.send_response(f["putStatus"]); self.send_header("Content-Length", "0"); self.end_headers(); return
            reply = f.get("putETag") or "\"put-1\""
            after = f.get("afterPut")
            if after is not None:
                f["body"] = after; f["length"] = str(len(after.encode())); f["etag"] = "\"other-1\""
            else:
                f["body"] = data.decode(); f["length"] = str(len(data)); f["etag"] = reply
            files[name] = f
            self.send_response(204); self.send_header("ETag", reply); self.send_header("Content-Length", "0"); self.end_headers()
        def do_GET(self):
            f = files.get(self.path[len("/dav/"):])
            if f is None:
                self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
            if f.get("getDelay"):
                import time; time.sleep(f["getDelay"])
            data = (f["getBody"] if f.get("getBody") is not None else f["body"]).encode()
            self.send_response(200); self.send_header("ETag", f["etag"])
            if f["contentLength"]:
                self.send_header("Content-Length", str(len(data)))
            else:
                self.send_header("Connection", "close"); self.close_connection = True
            self.end_headers(); self.wfile.write(data)
    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    server = Server(("127.0.0.1", 0), Handler)
    open(sys.argv[2] + ".tmp", "w").write(str(server.server_address[1]))
    import os; os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()
    """#

    private let directory: TempDirectory
    private var pid: pid_t = 0
    /// The TCP port on 127.0.0.1.
    public private(set) var port: UInt16 = 0
    /// The base URL of the collection ("http://127.0.0.1:PORT/dav/").
    public var baseURL: String { "http://127.0.0.1:\(port)/dav/" }

    /// The paths of the PROPFINDs the server answered so far, in order.
    public var propfinds: [String] {
        ((try? String(contentsOfFile: directory.file("port.propfinds"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// A server whose every collection holds a collection "d/" listed twice (an endless tree).
    public static func endless() throws -> LyingDAVServer {
        try LyingDAVServer(files: ["__endless__": File("", etag: "\"x\"")])
    }

    /// A server that answers every PROPFIND with `status` and `body` (as text/html).
    public static func answeringListings(_ status: Int, _ body: String) throws -> LyingDAVServer {
        try LyingDAVServer(files: ["__propfind__": File(body, etag: "\(status)")])
    }

    /// Starts the server with `files` (name -> file).
    /// - Throws: `TestSupportError` when it does not answer within 10 s.
    public init(files: [String: File]) throws {
        directory = try TempDirectory(prefix: "mamfs-lyingdav")
        try JSONEncoder().encode(files).write(to: URL(fileURLWithPath: directory.file("files.json")))
        let portFile = directory.file("port")
        var spawned: pid_t = 0
        let argv = ["/usr/bin/python3", "-c", Self.script, directory.file("files.json"), portFile]
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        guard posix_spawn(&spawned, argv[0], nil, nil, cArgs, environ) == 0 else {
            throw TestSupportError("cannot start python3 for the lying WebDAV server")
        }
        pid = spawned
        Patience.waitUntil(10, every: 0.02) { FileManager.default.fileExists(atPath: portFile) }
        guard let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = UInt16(text) else {
            stop()
            throw TestSupportError("the lying WebDAV server did not start")
        }
        self.port = port
    }

    deinit { stop() }

    /// Stops the server. Idempotent.
    public func stop() {
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        pid = 0
    }
}
