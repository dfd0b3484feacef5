import CCurl
import CCurlLoader
import Foundation
import MAMProtection

/// One HTTP request of the WebDAV store.
struct HTTPRequest {
    /// What the request sends after its headers.
    enum Body {
        /// Nothing.
        case none
        /// These bytes (a PROPFIND body).
        case bytes([UInt8])
        /// `length` bytes read from the open descriptor, from its current offset (a PUT):
        /// streamed, never held in memory as a whole.
        case file(fd: Int32, length: Int64)
    }

    /// Where the reply's body goes.
    enum Sink {
        /// Kept in memory, at most `HTTPClient.memoryLimit` bytes (a multistatus).
        case memory
        /// Written at the current offset of the open descriptor, but only for a 2xx reply (a
        /// GET); the body of any other status is kept in memory (the server's error page). With
        /// `limit`, a 2xx body longer than that many bytes ends the transfer with an error (a
        /// server sending more than the listing promised never fills the disk or memory).
        case file(Int32, limit: Int64?)
    }

    /// "GET", "PUT", "PROPFIND", ...
    var method: String
    /// The absolute URL, percent-encoded.
    var url: String
    /// Header lines ("Depth: 1").
    var headers: [String] = []
    var body: Body = .none
    var sink: Sink = .memory
}

/// The reply to an `HTTPRequest`.
struct HTTPResponse {
    /// The status code of the final reply (after any 100 Continue).
    var status: Int
    /// The reply's `ETag` header value as sent, when there was one.
    var etag: String?
    /// The body when it was kept in memory (empty when streamed to a file).
    var body: [UInt8]
    /// Bytes written to a `.file` sink.
    var bytesWritten: Int64
    /// Bytes of the request's body sent (read from a `.file` body or taken from `.bytes`).
    var bytesSent: Int64 = 0
}

/// Why a request got no HTTP reply.
enum HTTPTransportError: Error {
    /// Connection refused, name not resolved, timed out, connection dropped: retry later.
    case unreachable(String)
    /// Anything else (a TLS certificate not trusted, a local I/O error, a reply too large).
    case failed(String)
}

/// HTTP(S) over libcurl easy handles, safe to use from several threads: each request takes a
/// handle from a small pool (kept with its open connections) and gives it back afterwards.
///
/// Authentication is HTTP Basic with the credentials given; they go to libcurl only (never
/// into a URL or a message). TLS peer and host verification are libcurl's defaults and are
/// never turned off; `caFile` adds a CA bundle (CURLOPT_CAINFO). Only http and https are
/// allowed, redirects are not followed. A connection attempt gives up after 15 s, a transfer
/// that moves less than 1 byte/s for 60 s is abandoned (both `.unreachable`).
final class HTTPClient: @unchecked Sendable {
    /// The largest reply body kept in memory, in bytes.
    static let memoryLimit = 256 << 20

    private let credentials: RemoteCredentials?
    private let caFile: String?
    private let lock = NSLock()
    private var idle: [OpaquePointer] = []
    /// - Throws: `MAMError.internalError` naming the reason when libcurl (libcurl.so.4, the
    ///   libcurl4 package) cannot be loaded or initialised; it is loaded on first use.
    init(credentials: RemoteCredentials?, caFile: String?) throws {
        try HTTPClient.loadLibcurl()
        self.credentials = credentials
        self.caFile = caFile
    }

    /// Loads libcurl once per process (`mamfs_curl_load`).
    /// - Throws: `MAMError.internalError` with the dynamic loader's reason.
    static func loadLibcurl() throws {
        var reason = [CChar](repeating: 0, count: 512)
        guard mamfs_curl_load(&reason, reason.count) == 0 else {
            let text = reason.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw MAMError.internalError("the WebDAV remote needs libcurl (the libcurl4 package), which cannot be loaded: \(text)")
        }
    }

    deinit {
        for handle in idle { mamfs_curl_easy_cleanup(UnsafeMutableRawPointer(handle)) }
    }

    /// Sends `request` and waits for the whole reply.
    /// - Throws: `HTTPTransportError` when no HTTP reply came (an HTTP error status is a reply).
    func perform(_ request: HTTPRequest) throws -> HTTPResponse {
        guard let handle = checkout() else { throw HTTPTransportError.failed("libcurl could not make a handle") }
        let curl = UnsafeMutableRawPointer(handle)
        var keep = true
        defer {
            if keep { checkin(handle) } else { mamfs_curl_easy_cleanup(curl) }
        }
        let transfer = Transfer(request: request)
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { mamfs_curl_slist_free_all(headerList) }
        for line in request.headers { headerList = mamfs_curl_slist_append(headerList, line) }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            var ok = true
            func set(_ result: CURLcode) { if result != CURLE_OK { ok = false } }
            set(mamfs_curl_setopt_string(curl, CURLOPT_URL, request.url))
            set(mamfs_curl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "http,https"))
            set(mamfs_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0))
            set(mamfs_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1))
            set(mamfs_curl_setopt_long(curl, CURLOPT_CONNECTTIMEOUT_MS, 15_000))
            set(mamfs_curl_setopt_long(curl, CURLOPT_LOW_SPEED_LIMIT, 1))
            set(mamfs_curl_setopt_long(curl, CURLOPT_LOW_SPEED_TIME, 60))
            set(mamfs_curl_setopt_long(curl, CURLOPT_SSL_VERIFYPEER, 1))
            set(mamfs_curl_setopt_long(curl, CURLOPT_SSL_VERIFYHOST, 2))
            if let caFile { set(mamfs_curl_setopt_string(curl, CURLOPT_CAINFO, caFile)) }
            if let credentials {
                set(mamfs_curl_setopt_long(curl, CURLOPT_HTTPAUTH, Int(mamfs_curlauth_basic)))
                set(mamfs_curl_setopt_string(curl, CURLOPT_USERNAME, credentials.user))
                set(mamfs_curl_setopt_string(curl, CURLOPT_PASSWORD, credentials.password))
            }
            set(mamfs_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, errors.baseAddress))
            set(mamfs_curl_setopt_slist(curl, CURLOPT_HTTPHEADER, headerList))
            set(mamfs_curl_setopt_callback(curl, CURLOPT_HEADERFUNCTION, headerCallback))
            set(mamfs_curl_setopt_pointer(curl, CURLOPT_HEADERDATA, context))
            set(mamfs_curl_setopt_callback(curl, CURLOPT_WRITEFUNCTION, writeCallback))
            set(mamfs_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, context))
            switch request.method {
            case "GET": set(mamfs_curl_setopt_long(curl, CURLOPT_HTTPGET, 1))
            case "HEAD": set(mamfs_curl_setopt_long(curl, CURLOPT_NOBODY, 1))
            default: set(mamfs_curl_setopt_string(curl, CURLOPT_CUSTOMREQUEST, request.method))
            }
            switch request.body {
            case .none:
                break
            case .bytes(let bytes):
                set(mamfs_curl_setopt_long(curl, CURLOPT_UPLOAD, 1))
                set(mamfs_curl_setopt_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(bytes.count)))
            case .file(_, let length):
                set(mamfs_curl_setopt_long(curl, CURLOPT_UPLOAD, 1))
                set(mamfs_curl_setopt_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(length)))
            }
            if case .none = request.body {} else {
                set(mamfs_curl_setopt_callback(curl, CURLOPT_READFUNCTION, readCallback))
                set(mamfs_curl_setopt_pointer(curl, CURLOPT_READDATA, context))
            }
            guard ok else { return CURLE_FAILED_INIT }
            return mamfs_curl_easy_perform(curl)
        }
        guard code == CURLE_OK else {
            keep = false
            let written = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let detail = written.isEmpty ? String(cString: mamfs_curl_easy_strerror(code)) : written
            if let local = transfer.localError { throw HTTPTransportError.failed(local) }
            switch code {
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_OPERATION_TIMEDOUT,
                 CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_SSL_CONNECT_ERROR:
                throw HTTPTransportError.unreachable("\(request.method): \(detail)")
            default:
                throw HTTPTransportError.failed("\(request.method): \(detail)")
            }
        }
        var status = 0
        _ = mamfs_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        return HTTPResponse(status: status, etag: transfer.etag, body: transfer.body, bytesWritten: transfer.written,
                            bytesSent: Int64(transfer.sent))
    }

    private func checkout() -> OpaquePointer? {
        if let handle = lock.withLock({ idle.popLast() }) {
            mamfs_curl_easy_reset(UnsafeMutableRawPointer(handle))
            return handle
        }
        return mamfs_curl_easy_init().map { OpaquePointer($0) }
    }

    private func checkin(_ handle: OpaquePointer) {
        let extra: OpaquePointer? = lock.withLock {
            if idle.count < 8 { idle.append(handle); return nil }
            return handle
        }
        if let extra { mamfs_curl_easy_cleanup(UnsafeMutableRawPointer(extra)) }
    }
}

/// The state of one transfer the C callbacks see.
private final class Transfer {
    let request: HTTPRequest
    var status = 0
    var etag: String?
    var body: [UInt8] = []
    var written: Int64 = 0
    var sent = 0
    /// Set when a callback failed locally (so the curl error is not taken for a network one).
    var localError: String?

    init(request: HTTPRequest) { self.request = request }
}

private func transfer(_ context: UnsafeMutableRawPointer?) -> Transfer? {
    context.map { Unmanaged<Transfer>.fromOpaque($0).takeUnretainedValue() }
}

/// Status line: resets what earlier replies (100 Continue, a 401 before authentication) set.
/// `ETag:` header: kept.
private let headerCallback: mamfs_curl_data_callback = { buffer, size, count, context in
    let length = size * count
    guard let buffer, let state = transfer(context) else { return length }
    let line = String(decoding: UnsafeRawBufferPointer(start: buffer, count: length), as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)
    if line.hasPrefix("HTTP/") {
        let parts = line.split(separator: " ")
        state.status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        state.etag = nil
    } else if let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "etag" {
        state.etag = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return length
}

private let writeCallback: mamfs_curl_data_callback = { buffer, size, count, context in
    let length = size * count
    guard let buffer, let state = transfer(context) else { return 0 }
    if case .file(let fd, let limit) = state.request.sink, (200..<300).contains(state.status) {
        if let limit, state.written + Int64(length) > limit {
            state.localError = "the reply is longer than the \(limit) bytes the listing gives"
            return 0
        }
        var offset = 0
        while offset < length {
            let n = write(fd, buffer + offset, length - offset)
            if n < 0 {
                if errno == EINTR { continue }
                state.localError = "write: \(String(cString: strerror(errno)))"
                return 0
            }
            offset += n
        }
        state.written += Int64(length)
        return length
    }
    guard state.body.count + length <= HTTPClient.memoryLimit else {
        state.localError = "the reply is larger than \(HTTPClient.memoryLimit) bytes"
        return 0
    }
    state.body.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: length))
    return length
}

private let readCallback: mamfs_curl_data_callback = { buffer, size, count, context in
    let capacity = size * count
    guard let buffer, let state = transfer(context) else { return Int(CURL_READFUNC_ABORT) }
    switch state.request.body {
    case .none:
        return 0
    case .bytes(let bytes):
        let n = min(capacity, bytes.count - state.sent)
        bytes.withUnsafeBytes { raw in
            if n > 0, let base = raw.baseAddress { UnsafeMutableRawPointer(buffer).copyMemory(from: base + state.sent, byteCount: n) }
        }
        state.sent += n
        return n
    case .file(let fd, _):
        while true {
            let n = read(fd, buffer, capacity)
            if n >= 0 { state.sent += n; return n }
            if errno == EINTR { continue }
            state.localError = "read: \(String(cString: strerror(errno)))"
            return Int(CURL_READFUNC_ABORT)
        }
    }
}
