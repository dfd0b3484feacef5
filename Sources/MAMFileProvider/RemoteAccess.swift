import Foundation
import MAMProtection

/// How to reach a remote given as `--remote LOCATION`: an http(s) URL is a `WebDAVRemote`,
/// anything else a `LocalDirectoryRemote` on that directory.
///
/// For WebDAV, the credentials come from `credentialsFile` (netrc format, 0600, see
/// `RemoteCredentials.load`) when given, else from the environment (`MAMFS_REMOTE_USER`,
/// `MAMFS_REMOTE_PASSWORD`), else none; `caFile` adds a CA bundle for TLS. Both are ignored
/// for a local directory.
public struct RemoteAccess: Sendable, Equatable {
    /// `--remote-credentials FILE` (an absolute path), or nil.
    public var credentialsFile: String?
    /// `--remote-ca FILE` (an absolute path), or nil.
    public var caFile: String?

    public init(credentialsFile: String? = nil, caFile: String? = nil) {
        self.credentialsFile = credentialsFile
        self.caFile = caFile
    }

    /// The store for `location`.
    /// - Parameter log: receives the store's lines about skipped items.
    /// - Throws: `MAMError`: `.invalidArguments` (a malformed URL, plain http to a host that
    ///   is not loopback, a credentials file without an entry for the URL's host),
    ///   `.system(EACCES)` (a credentials file group or others may read), `.fileNotFound`.
    public func store(for location: String, environment: [String: String] = ProcessInfo.processInfo.environment,
                      log: (@Sendable (String) -> Void)? = nil) throws -> any RemoteStore {
        guard WebDAVRemote.isURL(location) else { return LocalDirectoryRemote(root: location, log: log) }
        var credentials: RemoteCredentials?
        if let credentialsFile {
            let host = URLComponents(string: location)?.host ?? ""
            guard let found = try RemoteCredentials.load(netrc: credentialsFile, host: host) else {
                throw MAMError.invalidArguments("credentials file \(credentialsFile) has no entry for \(host) (machine \(host) login USER password PASS)")
            }
            credentials = found
        } else {
            credentials = RemoteCredentials.fromEnvironment(environment)
        }
        if let caFile, access(caFile, R_OK) != 0 {
            throw MAMError.fileNotFound("CA file \(caFile)")
        }
        return try WebDAVRemote(baseURL: location, credentials: credentials, caFile: caFile, log: log)
    }
}
