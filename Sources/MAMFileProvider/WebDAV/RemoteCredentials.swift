import Foundation
import MAMProtection
import MAMSystem

/// A user name and password for HTTP Basic authentication to a WebDAV server.
///
/// Comes from a credentials file in netrc format (`--remote-credentials FILE`) or from the
/// environment (`MAMFS_REMOTE_USER`, `MAMFS_REMOTE_PASSWORD`), never from the command line.
/// The password is never part of `description`, a message or a log line.
public struct RemoteCredentials: Sendable, Equatable, CustomStringConvertible {
    /// The login.
    public let user: String
    /// The password (kept for libcurl only).
    public let password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// The user name only.
    public var description: String { "user '\(user)'" }

    /// The environment variable holding the user name.
    public static let userVariable = "MAMFS_REMOTE_USER"
    /// The environment variable holding the password.
    public static let passwordVariable = "MAMFS_REMOTE_PASSWORD"

    /// The credentials in `environment`, when both variables are set.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> RemoteCredentials? {
        guard let user = environment[userVariable], let password = environment[passwordVariable] else { return nil }
        return RemoteCredentials(user: user, password: password)
    }

    /// The entry for `host` in the netrc file at `path` (the `default` entry when no
    /// `machine` entry names the host).
    ///
    /// The file must be a regular file (a symlink is refused), owned by the caller, and not
    /// readable or writable by group or others (mode 0600 or 0400), as for ssh keys.
    /// - Parameter host: the server's host name as in the URL ("127.0.0.1", "dav.example.com").
    /// - Returns: nil when the file has no entry for the host.
    /// - Throws: `MAMError.system(EACCES)` (exit 77) for a file group or others may read or
    ///   another user owns; `.fileNotFound`; `.invalidArguments` for a malformed file.
    public static func load(netrc path: String, host: String) throws -> RemoteCredentials? {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            if error.rawValue == ENOENT { throw MAMError.fileNotFound("credentials file \(path)") }
            if error.rawValue == ELOOP { throw MAMError.invalidArguments("credentials file \(path) is a symbolic link") }
            throw MAMError.system("credentials file \(path)", errno: error.rawValue)
        }
        var st = stat()
        guard fstat(file.rawValue, &st) == 0 else { throw MAMError.fromErrno("credentials file \(path)") }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw MAMError.invalidArguments("credentials file \(path) is not a regular file") }
        guard st.st_mode & 0o077 == 0 else {
            throw MAMError.system(String(format: "credentials file %@ has mode %04o: group or others may read it; make it 0600 (chmod 600)",
                                         path, st.st_mode & 0o7777), errno: EACCES)
        }
        guard st.st_uid == geteuid() else {
            throw MAMError.system("credentials file \(path) belongs to uid \(st.st_uid), not to the caller", errno: EACCES)
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = read(file.rawValue, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw MAMError.fromErrno("read \(path)") }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return try parse(netrc: String(decoding: bytes, as: UTF8.self), host: host, path: path)
    }

    /// The entry for `host` in netrc text: whitespace-separated `machine NAME`, `default`,
    /// `login USER`, `password PASS` (and `account`, ignored); `macdef` ends parsing.
    /// - Throws: `.invalidArguments` (naming the file, never its contents) for a keyword
    ///   without its value.
    static func parse(netrc text: String, host: String, path: String) throws -> RemoteCredentials? {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).map(String.init)
        var entries: [(machine: String?, login: String?, password: String?)] = []
        var index = 0
        func value() throws -> String {
            index += 1
            guard index < tokens.count else { throw MAMError.invalidArguments("credentials file \(path): '\(tokens[index - 1])' has no value") }
            return tokens[index]
        }
        while index < tokens.count {
            switch tokens[index] {
            case "machine": entries.append((try value(), nil, nil))
            case "default": entries.append((nil, nil, nil))
            case "login", "password", "account":
                let keyword = tokens[index]
                let text = try value()
                guard !entries.isEmpty else { throw MAMError.invalidArguments("credentials file \(path): '\(keyword)' before any 'machine'") }
                if keyword == "login" { entries[entries.count - 1].login = text }
                if keyword == "password" { entries[entries.count - 1].password = text }
            case "macdef": index = tokens.count
            default: throw MAMError.invalidArguments("credentials file \(path): unknown keyword (expected machine, login, password)")
            }
            index += 1
        }
        let entry = entries.first(where: { $0.machine == host }) ?? entries.first(where: { $0.machine == nil })
        guard let entry, let login = entry.login, let password = entry.password else { return nil }
        return RemoteCredentials(user: login, password: password)
    }
}
