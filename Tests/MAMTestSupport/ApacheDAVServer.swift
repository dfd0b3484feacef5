import Foundation
import Glibc

/// A real Apache httpd serving one WebDAV collection (mod_dav + mod_dav_fs) with HTTP Basic
/// authentication on 127.0.0.1, for the WebDAV store's tests: no mock server.
///
/// Layout of its temp ServerRoot (0755, so the www-data workers can traverse it):
/// `httpd.conf`, `htpasswd` (bcrypt, made with `htpasswd -B`), `www/dav/` (the collection,
/// owned by www-data: Apache refuses to run as root, its workers write here), `lock/` (the
/// DavLockDB), `error.log`, `httpd.pid`. The server is `apache2 -f CONF -DFOREGROUND`, started
/// on a free port and stopped by its PID (SIGTERM, then SIGKILL after 10 s) by `kill()`,
/// `stop()` and deinit; `restart()` starts it again on the same port and collection.
public final class ApacheDAVServer: @unchecked Sendable {
    /// The Apache binary.
    public static let binary = "/usr/sbin/apache2"
    /// The modules directory of Debian's apache2 package.
    public static let modules = "/usr/lib/apache2/modules"
    /// The uid and gid Apache's workers run as (www-data).
    public static let workerID: (uid: uid_t, gid: gid_t) = {
        guard let entry = getpwnam("www-data") else { return (33, 33) }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }()

    /// True when Apache and its DAV module are installed (`make deps` installs them).
    public static var isAvailable: Bool {
        access(binary, X_OK) == 0 && access(modules + "/mod_dav_fs.so", R_OK) == 0 && access("/usr/bin/htpasswd", X_OK) == 0
    }

    /// The temp ServerRoot.
    public let root: TempDirectory
    /// The directory Apache serves as the collection: files put here are what "another client"
    /// wrote; files here are what the store sent.
    public let davDirectory: String
    /// The login and password the server accepts.
    public let user = "mamfs-test"
    public let password: String
    /// The TCP port on 127.0.0.1.
    public private(set) var port: UInt16 = 0
    /// The base URL of the collection ("http://127.0.0.1:PORT/dav/").
    public var baseURL: String { "http://127.0.0.1:\(port)/dav/" }
    /// Apache's error log.
    public var errorLog: String { root.file("error.log") }

    private var pid: pid_t = 0
    /// True while the server answers every method but GET, HEAD, OPTIONS and PROPFIND with 403.
    public private(set) var refusesWrites = false

    /// Writes the configuration and starts the server.
    /// - Throws: `TestSupportError` when Apache does not start or answer within 15 s.
    public init() throws {
        root = try TempDirectory(prefix: "mamfs-apache")
        chmod(root.path, 0o755)
        davDirectory = root.file("www/dav")
        password = "pw-" + UUID().uuidString
        for directory in [root.file("www"), davDirectory, root.file("lock")] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try giveToWorkers(davDirectory)
        try giveToWorkers(root.file("lock"))
        let made = try shell("/usr/bin/htpasswd -bcB \(shellQuote(root.file("htpasswd"))) \(shellQuote(user)) \(shellQuote(password)) 2>&1")
        guard made.status == 0 else { throw TestSupportError("htpasswd failed: \(made.out)") }
        chmod(root.file("htpasswd"), 0o644)
        try start(port: nil)
    }

    deinit { stop() }

    /// Makes `path` belong to the workers' user (for files and directories put in the collection).
    public func giveToWorkers(_ path: String) throws {
        guard chown(path, ApacheDAVServer.workerID.uid, ApacheDAVServer.workerID.gid) == 0 else {
            throw TestSupportError("chown \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes a file into the collection the way another client would (a new file owned by the
    /// workers, parents made as needed), bypassing the store.
    public func write(_ relative: String, _ bytes: [UInt8]) throws {
        let path = davDirectory + "/" + relative
        var parent = (path as NSString).deletingLastPathComponent
        var missing: [String] = []
        while !FileManager.default.fileExists(atPath: parent) && parent.count > davDirectory.count {
            missing.append(parent)
            parent = (parent as NSString).deletingLastPathComponent
        }
        for directory in missing.reversed() {
            guard mkdir(directory, 0o755) == 0 || errno == EEXIST else { throw TestSupportError("mkdir \(directory)") }
            try giveToWorkers(directory)
        }
        let temp = path + ".incoming-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: temp))
        try giveToWorkers(temp)
        guard rename(temp, path) == 0 else { throw TestSupportError("rename \(temp): \(String(cString: strerror(errno)))") }
    }

    /// Every regular file below the collection (relative paths, sorted).
    public func files() -> [String] { regularFiles(under: davDirectory) }

    /// Stops the server the way a crash would look to clients (SIGKILL to the whole group:
    /// connections are refused until `restart()`).
    public func kill() {
        guard pid > 0 else { return }
        Glibc.kill(-pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        // The workers are gone too before this returns (at most 10 s, nominal, stretched by
        // `Patience`): one still holding the listening socket would answer a restart's first
        // connection, or keep its port.
        let group = pid
        Patience.waitUntil(10, every: 0.01) { !ApacheDAVServer.hasLiveMember(group: group) }
        pid = 0
    }

    /// True while a process of the group `group` runs (zombies waiting to be reaped left out),
    /// from the state and process group fields of /proc/PID/stat.
    static func hasLiveMember(group: pid_t) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return false }
        for entry in entries where pid_t(entry) != nil {
            guard let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // state, ppid, pgrp
            if fields.count > 2, fields[0] != "Z", pid_t(fields[2]) == group { return true }
        }
        return false
    }

    /// Starts the server again on the same port, collection and password.
    /// - Throws: `TestSupportError` when it does not come up.
    public func restart() throws {
        kill()
        try start(port: port)
    }

    /// Makes the server refuse (403) or accept again every method that would change the
    /// collection (PUT, MKCOL, MOVE, DELETE, ...), restarting it on the same port.
    /// - Throws: `TestSupportError` when it does not come up again.
    public func setRefusesWrites(_ refuse: Bool) throws {
        refusesWrites = refuse
        try restart()
    }

    /// Stops the server (SIGTERM to its group, SIGKILL after 10 s). Idempotent.
    public func stop() {
        guard pid > 0 else { return }
        Glibc.kill(-pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) == pid { pid = 0; return }
            usleep(100_000)
        }
        kill()
    }

    // MARK: Starting

    private func start(port requested: UInt16?) throws {
        var lastError = ""
        for _ in 0..<(requested == nil ? 5 : 20) {
            let candidate = try requested ?? ApacheDAVServer.freePort()
            try writeConfiguration(port: candidate)
            try spawn()
            if waitUntilAnswering(candidate) {
                port = candidate
                return
            }
            lastError = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
            kill()
            if requested != nil { usleep(250_000) }
        }
        throw TestSupportError("apache2 did not start: \(lastError.suffix(2000))")
    }

    private func writeConfiguration(port: UInt16) throws {
        let modules = ApacheDAVServer.modules
        let conf = """
            ServerRoot \(root.path)
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule authn_core_module \(modules)/mod_authn_core.so
            LoadModule authn_file_module \(modules)/mod_authn_file.so
            LoadModule auth_basic_module \(modules)/mod_auth_basic.so
            LoadModule authz_user_module \(modules)/mod_authz_user.so
            LoadModule dav_module \(modules)/mod_dav.so
            LoadModule dav_fs_module \(modules)/mod_dav_fs.so
            User www-data
            Group www-data
            PidFile \(root.file("httpd.pid"))
            ErrorLog \(errorLog)
            LogLevel warn
            DocumentRoot \(root.file("www"))
            DavLockDB \(root.file("lock/DavLock"))
            LimitRequestBody 0
            Timeout 120
            <Directory \(davDirectory)>
                Dav On
                AuthType Basic
                AuthName "mamfs test"
                AuthUserFile \(root.file("htpasswd"))
                <RequireAll>
                    Require valid-user
                    \(refusesWrites ? "Require method GET HEAD OPTIONS PROPFIND" : "")
                </RequireAll>
            </Directory>

            """
        try Data(conf.utf8).write(to: URL(fileURLWithPath: root.file("httpd.conf")))
    }

    private func spawn() throws {
        pid = try spawnProcess(ApacheDAVServer.binary, ["-f", root.file("httpd.conf"), "-DFOREGROUND"],
                               environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"],
                               stdin: "/dev/null", stdout: root.file("stdout.log"), stderr: root.file("stdout.log"), truncate: false)
    }

    /// True once a TCP connection to the port succeeds (at most 15 s, nominal, stretched by
    /// `Patience`), false when the server exited first.
    private func waitUntilAnswering(_ port: UInt16) -> Bool {
        var answering = false
        Patience.waitUntil(15) {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { pid = 0; return true }
            answering = ApacheDAVServer.connects(port)
            return answering
        }
        return answering
    }

    static func connects(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// A port on 127.0.0.1 that nothing listens on right now.
    public static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = loopback(0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw TestSupportError("bind: \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    private static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
