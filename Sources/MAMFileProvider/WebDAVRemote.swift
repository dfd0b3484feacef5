import Foundation
import MAMProtection
import MAMSystem

/// A remote store on a WebDAV server (RFC 4918), e.g. Apache mod_dav, Nextcloud, rclone serve
/// webdav (`--remote https://host/dav/`).
///
/// Identity: an item's identifier is its path below the base URL, decoded to its exact
/// Unicode bytes ("docs/a b.txt"; `ItemIdentifier.rootContainer` is the base collection), so
/// a rename changes it, as for `LocalDirectoryRemote`. URLs are built by percent-encoding
/// every byte that is not unreserved (`DAVPath`); hrefs the server sends are decoded the same
/// way, and an href that is not UTF-8 or lies outside the base is skipped and logged.
/// `fileID` is `oc:fileid` when the server has it (Nextcloud, ownCloud), else nil.
///
/// Versions:
/// - `contentVersion` of a file is its entity tag without the weakness marker (`W/"x"` and
///   `"x"` give `"x"`): Apache mod_dav_fs sends a weak tag for about a second after a change,
///   then the same tag as a strong one, and the two name the same bytes. A collection's is its
///   entity tag when the server gives one (Apache's follows the directory's listing), else "d".
/// - `metadataVersion` is an FNV-1a hash of (name, parent, getlastmodified).
///
/// Preconditions are the server's, so they are atomic with the change: `create` sends
/// `If-None-Match: *` (PUT) or MKCOL, `modify` and `delete` send the RFC 4918 `If:` header
/// with the base entity tag (`If-Match` never matches a weak tag), `move` sends
/// `Overwrite: F`. A 412 reply is `.conflict`. Deleting a collection checks that it is empty
/// with a PROPFIND and sends its entity tag with the DELETE, so a child added meanwhile
/// changes the tag and the DELETE is refused; `baseVersion` is not compared for collections.
///
/// Contents are streamed both ways (libcurl read and write callbacks on the descriptors): no
/// file is ever held in memory as a whole, and nothing is written to a local temp file.
///
/// Transport: HTTP Basic with `RemoteCredentials`; TLS verification always on (`caFile` adds
/// a CA bundle); plain `http://` only to a loopback host (127.0.0.0/8, ::1, localhost), so a
/// password never crosses a network in clear. Connection failures and timeouts are
/// `.unreachable`; 401/403 `.unauthorized`; 404 `.notFound`; 409 (missing parent)
/// `.notFound(parent)`; 412 `.conflict`; 507 `.insufficientStorage`; other statuses
/// `.failed` naming method and status. A base collection that does not exist (404,
/// 409, or 405 to its PROPFIND: no WebDAV collection there) is `.unreachable`, like a
/// missing local root. Safe to call from several threads.
public struct WebDAVRemote: RemoteStore {
    /// The base URL as given.
    public let baseURL: String
    private let path: DAVPath
    private let client: HTTPClient
    private let log: @Sendable (String) -> Void

    /// - Parameters:
    ///   - baseURL: the collection holding the files ("https://host/remote.php/dav/files/u/").
    ///   - credentials: Basic credentials, nil for a server without authentication.
    ///   - caFile: a PEM CA bundle to trust besides the system's, nil for the system's only.
    ///   - log: receives one line per skipped item (defaults to stderr); never a password.
    /// - Throws: `MAMError.invalidArguments` for a URL that is not http(s), holds credentials,
    ///   or is plain http to a host that is not loopback; `MAMError.internalError` when libcurl
    ///   cannot be loaded.
    public init(baseURL: String, credentials: RemoteCredentials?, caFile: String? = nil,
                log: (@Sendable (String) -> Void)? = nil) throws {
        let path = try DAVPath(baseURL: baseURL)
        if path.origin.hasPrefix("http://"), let host = URLComponents(string: baseURL)?.host, !WebDAVRemote.isLoopback(host) {
            throw MAMError.invalidArguments("plain http:// is only allowed to a loopback host (the password would cross the network in clear): use https://")
        }
        self.baseURL = baseURL
        self.path = path
        self.client = try HTTPClient(credentials: credentials, caFile: caFile)
        self.log = log ?? { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// True for 127.0.0.0/8, ::1 and "localhost".
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if bare == "localhost" || bare == "::1" { return true }
        let parts = bare.split(separator: ".")
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// True when `location` names a WebDAV remote (an http:// or https:// URL).
    public static func isURL(_ location: String) -> Bool {
        let lower = location.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    public var location: String { baseURL }

    /// nil: a WebDAV server has no volume the store could name.
    public func volumeIdentity() throws -> String? { nil }

    public func enumerate(container: ItemIdentifier) throws -> [RemoteItem] {
        let resources = try propfind(container, depth: "1", collection: true)
        guard let own = resources.first(where: { path.identifier(href: $0.href) == container }), own.isCollection else {
            throw RemoteError.notFound(container)
        }
        var items: [RemoteItem] = []
        for resource in resources {
            guard let identifier = path.identifier(href: resource.href) else {
                log("remote \(baseURL): skipped '\(resource.href)': the name is not valid UTF-8 or lies outside the base URL")
                continue
            }
            guard identifier != container else { continue }
            guard let item = makeItem(identifier, resource) else { continue }
            if container == .rootContainer && ProviderBinding.isReservedTopName(item.filename) {
                log("remote \(baseURL): skipped '\(item.filename)': the name is reserved for the provider's own files")
                continue
            }
            guard item.parentIdentifier == container else { continue }
            items.append(item)
        }
        return items
    }

    public func item(_ identifier: ItemIdentifier) throws -> RemoteItem {
        try listed(identifier).item
    }

    /// The item as a PROPFIND lists it, with the length the listing gives (nil when it gives
    /// none it can be trusted with).
    private func listed(_ identifier: ItemIdentifier) throws -> (item: RemoteItem, length: Int64?) {
        try validate(identifier)
        let resources = try propfind(identifier, depth: "0", collection: false)
        guard let resource = resources.first(where: { path.identifier(href: $0.href) == identifier }),
              let item = makeItem(identifier, resource) else {
            throw RemoteError.notFound(identifier)
        }
        return (item, resource.contentLength)
    }

    public func readContents(of identifier: ItemIdentifier, into destination: URL) throws -> RemoteItem {
        let outFile: FileDescriptor
        do {
            outFile = try FileDescriptor.open(destination.path, O_WRONLY | O_CLOEXEC)
        } catch {
            throw RemoteError.failed("cannot open \(destination.path): \(String(cString: strerror(error.rawValue)))")
        }
        let out = outFile.rawValue
        var lastSeen: ItemVersion?
        var short: (got: Int64, listed: Int64)?
        for _ in 0..<3 {
            short = nil
            let (listed, length) = try self.listed(identifier)
            guard listed.type == .file else { throw RemoteError.failed("'\(identifier)' is not a file") }
            guard ftruncate(out, 0) == 0, lseek(out, 0, SEEK_SET) == 0 else {
                throw RemoteError.failed("cannot truncate \(destination.path): \(String(cString: strerror(errno)))")
            }
            let response = try send(HTTPRequest(method: "GET", url: path.url(identifier), sink: .file(out, limit: length)), identifier)
            guard response.status == 200 else { throw statusError(response.status, "GET", identifier) }
            lastSeen = listed.version
            if let etag = response.etag, WebDAVRemote.contentVersion(etag: etag) != listed.version.contentVersion { continue }
            // The same version as listed (or a GET without an ETag): the body must be as long as
            // the listing says. A shorter one is a cut-off transfer or a lying server, never the
            // file; it may also be a change between the PROPFIND and the GET: asked again.
            if let length, response.bytesWritten != length {
                short = (response.bytesWritten, length)
                continue
            }
            var item = listed
            item.size = response.bytesWritten
            return item
        }
        if let short {
            throw RemoteError.failed("GET '\(identifier)': the server sent \(short.got) bytes where its listing gives \(short.listed); nothing was taken")
        }
        throw RemoteError.conflict(identifier, current: lastSeen)
    }

    public func create(parent: ItemIdentifier, name: String, contents: RemoteContents) throws -> RemoteItem {
        try validate(name: name)
        try validate(parent)
        let identifier = parent == .rootContainer ? ItemIdentifier(name) : ItemIdentifier(parent.rawValue + "/" + name)
        switch contents {
        case .symlink:
            throw RemoteError.failed("WebDAV has no symbolic links")
        case .directory:
            let response = try send(HTTPRequest(method: "MKCOL", url: path.url(identifier, collection: true)), identifier)
            switch response.status {
            case 200..<300: break
            case 405: throw RemoteError.conflict(identifier, current: (try? item(identifier))?.version)
            case 409: throw RemoteError.notFound(parent)
            default: throw statusError(response.status, "MKCOL", identifier)
            }
        case .file(let url):
            let response = try upload(url, to: identifier, headers: ["If-None-Match: *"])
            switch response.status {
            case 200..<300: break
            case 412, 405: throw RemoteError.conflict(identifier, current: (try? item(identifier))?.version)
            case 409: throw RemoteError.notFound(parent)
            default: throw statusError(response.status, "PUT", identifier)
            }
            return try uploaded(identifier, response)
        }
        return try item(identifier)
    }

    /// The item a PUT made, with the version the PUT's own reply gave (its ETag): the PROPFIND
    /// after it may already see another client's write, whose version must not be taken for
    /// ours (the next pass would then overwrite that write without a conflict). A reply
    /// without an ETag keeps the listed version, unless the listed size is not what was sent:
    /// then the version is marked unknown, so the next pass compares the two as a change.
    private func uploaded(_ identifier: ItemIdentifier, _ response: HTTPResponse) throws -> RemoteItem {
        var (item, length) = try listed(identifier)
        if let etag = response.etag, !etag.isEmpty {
            item.version.contentVersion = WebDAVRemote.contentVersion(etag: etag)
        } else if let length, length != response.bytesSent {
            item.version.contentVersion = "unknown-after-upload"
        }
        return item
    }

    public func modify(_ identifier: ItemIdentifier, baseVersion: String, contentsURL: URL) throws -> RemoteItem {
        try validate(identifier)
        guard identifier != .rootContainer else { throw RemoteError.failed("the root is not a file") }
        let response = try upload(contentsURL, to: identifier, headers: [WebDAVRemote.ifHeader(path.url(identifier), baseVersion)])
        switch response.status {
        case 200..<300: break
        case 412: throw currentConflict(identifier)
        case 405: throw RemoteError.failed("'\(identifier)' is not a file")
        case 409: throw RemoteError.notFound(identifier)
        default: throw statusError(response.status, "PUT", identifier)
        }
        return try uploaded(identifier, response)
    }

    public func delete(_ identifier: ItemIdentifier, baseVersion: String?) throws {
        try validate(identifier)
        guard identifier != .rootContainer else { throw RemoteError.failed("the root cannot be deleted") }
        let current = try item(identifier)
        var headers: [String] = []
        let url = path.url(identifier, collection: current.type == .directory)
        if current.type == .directory {
            let resources = try propfind(identifier, depth: "1", collection: true)
            let others = resources.filter { path.identifier(href: $0.href) != identifier }
            guard others.isEmpty else { throw RemoteError.conflict(identifier, current: current.version) }
            let own = resources.first { path.identifier(href: $0.href) == identifier }
            if let etag = own?.etag { headers.append(WebDAVRemote.ifHeader(url, WebDAVRemote.contentVersion(etag: etag))) }
        } else if let baseVersion {
            headers.append(WebDAVRemote.ifHeader(url, baseVersion))
        }
        let response = try send(HTTPRequest(method: "DELETE", url: url, headers: headers), identifier)
        switch response.status {
        case 200..<300: break
        case 404: throw RemoteError.notFound(identifier)
        case 412: throw currentConflict(identifier)
        default: throw statusError(response.status, "DELETE", identifier)
        }
    }

    public func move(_ identifier: ItemIdentifier, toParent newParent: ItemIdentifier, newName: String) throws -> RemoteItem {
        try validate(identifier)
        try validate(newParent)
        guard identifier != .rootContainer else { throw RemoteError.failed("the root cannot be moved") }
        try validate(name: newName)
        let current = try item(identifier)
        let target = newParent == .rootContainer ? ItemIdentifier(newName) : ItemIdentifier(newParent.rawValue + "/" + newName)
        let collection = current.type == .directory
        let request = HTTPRequest(method: "MOVE", url: path.url(identifier, collection: collection),
                                  headers: ["Destination: \(path.url(target, collection: collection))", "Overwrite: F"])
        let response = try send(request, identifier)
        switch response.status {
        case 200..<300: break
        case 404: throw RemoteError.notFound(identifier)
        case 409: throw RemoteError.notFound(newParent)
        case 412: throw RemoteError.conflict(target, current: (try? item(target))?.version)
        default: throw statusError(response.status, "MOVE", identifier)
        }
        return try item(target)
    }

    // MARK: Requests

    /// PROPFIND with `depth` ("0" or "1") on an item.
    private func propfind(_ identifier: ItemIdentifier, depth: String, collection: Bool) throws -> [DAVResource] {
        let request = HTTPRequest(method: "PROPFIND", url: path.url(identifier, collection: collection),
                                  headers: ["Depth: \(depth)", "Content-Type: application/xml; charset=utf-8"],
                                  body: .bytes(MultiStatusParser.propfindBody))
        let response = try send(request, identifier)
        switch response.status {
        case 207: break
        case 404, 409:
            if identifier == .rootContainer { throw RemoteError.unreachable("\(baseURL): the collection does not exist (HTTP \(response.status))") }
            throw RemoteError.notFound(identifier)
        case 405 where identifier == .rootContainer:
            // What Apache answers once the collection's directory is gone: the URL is no WebDAV
            // collection any more, like a share that is not mounted; retry later, delete nothing.
            throw RemoteError.unreachable("\(baseURL): not a WebDAV collection (HTTP 405)")
        default: throw statusError(response.status, "PROPFIND", identifier)
        }
        guard let resources = MultiStatusParser.parse(response.body) else {
            throw RemoteError.failed("PROPFIND '\(identifier)': the server's reply is not a WebDAV multistatus")
        }
        return resources
    }

    /// PUT of the file at `url`, streamed.
    private func upload(_ url: URL, to identifier: ItemIdentifier, headers: [String]) throws -> HTTPResponse {
        let sourceFile: FileDescriptor
        do {
            sourceFile = try FileDescriptor.open(url.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        } catch {
            throw RemoteError.failed("cannot open \(url.path): \(String(cString: strerror(error.rawValue)))")
        }
        var st = stat()
        guard fstat(sourceFile.rawValue, &st) == 0, FileSystem.isRegular(st) else {
            throw RemoteError.failed("\(url.path) is not a regular file")
        }
        let request = HTTPRequest(method: "PUT", url: path.url(identifier), headers: headers + ["Content-Type: application/octet-stream"],
                                  body: .file(fd: sourceFile.rawValue, length: Int64(st.st_size)))
        return try send(request, identifier)
    }

    /// Sends a request; 401/403/507 are mapped here for every method.
    private func send(_ request: HTTPRequest, _ identifier: ItemIdentifier) throws -> HTTPResponse {
        let response: HTTPResponse
        do {
            response = try client.perform(request)
        } catch HTTPTransportError.unreachable(let detail) {
            throw RemoteError.unreachable("\(baseURL): \(detail)")
        } catch HTTPTransportError.failed(let detail) {
            throw RemoteError.failed("\(baseURL) '\(identifier)': \(detail)")
        }
        switch response.status {
        case 401: throw RemoteError.unauthorized("\(baseURL): the server refused the credentials (HTTP 401 on \(request.method))")
        case 403: throw RemoteError.unauthorized("\(baseURL): access to '\(identifier)' is forbidden (HTTP 403 on \(request.method))")
        case 507: throw RemoteError.insufficientStorage(identifier)
        default: return response
        }
    }

    /// An unexpected status: `.unreachable` for 502, 503 and 504 (a gateway or the server
    /// itself saying it is down for now: the pass stops and is run again), `.failed` otherwise.
    private func statusError(_ status: Int, _ method: String, _ identifier: ItemIdentifier) -> RemoteError {
        switch status {
        case 502, 503, 504: return .unreachable("\(baseURL): \(method) '\(identifier)': HTTP \(status) (the server is down for now)")
        default: return .failed("\(method) '\(identifier)': HTTP \(status)")
        }
    }

    /// A 412 on an existing item: a conflict with its current version; on a vanished one: not found.
    private func currentConflict(_ identifier: ItemIdentifier) -> RemoteError {
        do {
            return .conflict(identifier, current: try item(identifier).version)
        } catch let error as RemoteError {
            return error
        } catch {
            return .conflict(identifier, current: nil)
        }
    }

    // MARK: Items and versions

    /// The RFC 4918 `If:` header for "the resource at `url` still has this entity tag": a
    /// tagged list, so the condition names this resource only (an untagged one also applies
    /// to the parent collection a DELETE changes, whose tag is another).
    static func ifHeader(_ url: String, _ contentVersion: String) -> String { "If: <\(url)> ([\(contentVersion)])" }

    /// The content version of an entity tag: the tag without a weakness marker.
    static func contentVersion(etag: String) -> String {
        etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    }

    private func makeItem(_ identifier: ItemIdentifier, _ resource: DAVResource) -> RemoteItem? {
        let relative = identifier.rawValue
        let name: String
        let parent: ItemIdentifier
        if identifier == .rootContainer {
            name = ""
            parent = .rootContainer
        } else if let slash = relative.utf8.lastIndex(of: UInt8(ascii: "/")) {
            name = String(relative[relative.utf8.index(after: slash)...])
            parent = ItemIdentifier(String(relative[..<slash]))
        } else {
            name = relative
            parent = .rootContainer
        }
        let type: ItemType = resource.isCollection ? .directory : .file
        let content: String
        if type == .directory {
            content = resource.etag.map(WebDAVRemote.contentVersion(etag:)) ?? "d"
        } else {
            guard let etag = resource.etag else {
                log("remote \(baseURL): skipped '\(relative)': the server gives it no entity tag")
                return nil
            }
            content = WebDAVRemote.contentVersion(etag: etag)
        }
        let metadata = "m:" + FileSystem.fnv1a("\(name)\u{0}\(parent.rawValue)\u{0}\(resource.lastModified ?? "")")
        return RemoteItem(identifier: identifier, parentIdentifier: parent, filename: name, type: type,
                          size: type == .directory ? 0 : resource.contentLength ?? 0,
                          version: ItemVersion(contentVersion: content, metadataVersion: metadata),
                          mode: nil, symlinkTarget: nil, fileID: resource.fileID)
    }

    /// Identifiers that would leave the base (empty, "." or ".." components) are unknown.
    private func validate(_ identifier: ItemIdentifier) throws {
        if identifier == .rootContainer { return }
        let parts = identifier.rawValue.split(separator: "/", omittingEmptySubsequences: false)
        guard !parts.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." || $0.contains("\0") }) else {
            throw RemoteError.notFound(identifier)
        }
    }

    private func validate(name: String) throws {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.contains("\0"),
              !FileSystem.isTemporaryName(name), name.utf8.count <= 255 else {
            throw RemoteError.failed("'\(name)' is not a valid name")
        }
    }
}
