import Foundation
import MAMProtection

/// The mapping between store identifiers (paths below the base URL, exact Unicode bytes) and
/// the percent-encoded URLs and hrefs of a WebDAV server.
///
/// Encoding: every byte of a name that is not an RFC 3986 unreserved character
/// (`A-Z a-z 0-9 - . _ ~`) is sent as `%XX`: spaces, '#', '%', '?', and each byte of a
/// non-ASCII character. Names are never normalized, so NFC and NFD spellings of one word are
/// two resources and each comes back exactly as it was sent.
struct DAVPath: Sendable {
    /// "http://host:port" (scheme, host and port of the base URL).
    let origin: String
    /// The base path as the server writes it, percent-encoded, ending in "/" ("/dav/").
    let encodedBase: String
    /// The base path's bytes decoded, ending in "/".
    let decodedBase: [UInt8]

    /// Splits an http(s) base URL.
    /// - Throws: `MAMError.invalidArguments` for a URL that is not http(s) or has a query,
    ///   fragment or user information in it.
    init(baseURL: String) throws {
        guard let components = URLComponents(string: baseURL), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty else {
            throw MAMError.invalidArguments("'\(baseURL)' is not an http:// or https:// URL")
        }
        guard components.query == nil, components.fragment == nil, components.user == nil, components.password == nil else {
            throw MAMError.invalidArguments("the remote URL may not hold a query, a fragment or credentials (use --remote-credentials)")
        }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        origin = "\(scheme)://\(hostPart)" + (components.port.map { ":\($0)" } ?? "")
        var path = components.percentEncodedPath
        if path.isEmpty { path = "/" }
        if !path.hasSuffix("/") { path += "/" }
        guard let decoded = DAVPath.percentDecoded(path) else {
            throw MAMError.invalidArguments("the remote URL's path is not valid percent-encoding")
        }
        encodedBase = path
        decodedBase = decoded
    }

    /// The URL of an item; collections get a trailing "/" (as servers name them).
    func url(_ identifier: ItemIdentifier, collection: Bool = false) -> String {
        if identifier == .rootContainer { return origin + encodedBase }
        let encoded = identifier.rawValue.split(separator: "/", omittingEmptySubsequences: false)
            .map { DAVPath.percentEncoded(Substring($0)) }.joined(separator: "/")
        return origin + encodedBase + encoded + (collection ? "/" : "")
    }

    /// The identifier an href of a multistatus names (an absolute path or a full URL), nil
    /// when it lies outside the base path, its bytes are not UTF-8, or a component is empty,
    /// "." or "..".
    func identifier(href: String) -> ItemIdentifier? {
        var path = Substring(href)
        if let scheme = path.range(of: "://") {
            let afterScheme = path[scheme.upperBound...]
            path = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        }
        guard let bytes = DAVPath.percentDecoded(path) else { return nil }
        var relative: ArraySlice<UInt8>
        if bytes.starts(with: decodedBase) {
            relative = bytes[decodedBase.count...]
        } else if bytes == Array(decodedBase.dropLast()) {
            relative = []
        } else {
            return nil
        }
        while relative.last == UInt8(ascii: "/") { relative = relative.dropLast() }
        if relative.isEmpty { return .rootContainer }
        guard let text = String(validating: relative, as: UTF8.self) else { return nil }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." || $0.contains("\0") }) else { return nil }
        return ItemIdentifier(text)
    }

    /// `name` with every byte but the unreserved ones as `%XX`.
    static func percentEncoded(_ name: Substring) -> String {
        var out = ""
        out.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// The bytes of a percent-encoded string, nil for a '%' not followed by two hex digits.
    static func percentDecoded(_ text: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) else { return nil }
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    static func percentDecoded(_ text: String) -> [UInt8]? { percentDecoded(Substring(text)) }
}
