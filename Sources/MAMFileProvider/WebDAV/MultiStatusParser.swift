import CXMLTree
import Foundation

/// One `<D:response>` of a PROPFIND multistatus (RFC 4918 §14.16), with the properties that
/// came back with status 200.
struct DAVResource: Equatable {
    /// The `<D:href>` text as sent (percent-encoded).
    var href: String
    /// True when `<D:resourcetype>` holds `<D:collection/>`.
    var isCollection = false
    /// `<D:getetag>` as sent (`W/"..."` or `"..."`).
    var etag: String?
    /// `<D:getcontentlength>` in bytes; nil when missing, negative or above `largestLength`
    /// (a lying server: sums of such sizes would overflow).
    var contentLength: Int64?
    /// The largest length taken from a listing: 2^50 bytes (1 PiB).
    static let largestLength: Int64 = 1 << 50
    /// `<D:getlastmodified>` as sent (an HTTP date), compared as text only.
    var lastModified: String?
    /// `<oc:fileid>` (ownCloud/Nextcloud namespace), when the server has it.
    var fileID: String?
}

/// Parses multistatus bodies with libxml2 (no network access, no entity expansion, no DTD
/// loading: a hostile server cannot make the parser read files or URLs).
enum MultiStatusParser {
    static let davNamespace = "DAV:"
    static let ownCloudNamespace = "http://owncloud.org/ns"

    /// The PROPFIND body asking for the properties `DAVResource` holds.
    static let propfindBody = Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"><d:prop>\
        <d:resourcetype/><d:getetag/><d:getcontentlength/><d:getlastmodified/><oc:fileid/>\
        </d:prop></d:propfind>
        """.utf8)

    /// The responses of a multistatus body, in document order.
    /// - Returns: nil when the body is not a well-formed `<D:multistatus>`.
    static func parse(_ body: [UInt8]) -> [DAVResource]? {
        let document: UnsafeMutableRawPointer? = body.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.flatMap { base in
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    mamfs_xml_parse($0, Int32(clamping: buffer.count))
                }
            }
        }
        guard let document else { return nil }
        defer { mamfs_xml_free(document) }
        guard let root = mamfs_xml_root(document), isElement(root, davNamespace, "multistatus") else { return nil }
        var resources: [DAVResource] = []
        for response in children(of: root) where isElement(response, davNamespace, "response") {
            guard let hrefNode = children(of: response).first(where: { isElement($0, davNamespace, "href") }) else { continue }
            var resource = DAVResource(href: text(of: hrefNode).trimmingCharacters(in: .whitespacesAndNewlines))
            for propstat in children(of: response) where isElement(propstat, davNamespace, "propstat") {
                let status = children(of: propstat).first(where: { isElement($0, davNamespace, "status") }).map(text(of:)) ?? ""
                guard status.split(separator: " ").dropFirst().first == "200" else { continue }
                for prop in children(of: propstat) where isElement(prop, davNamespace, "prop") {
                    for property in children(of: prop) { read(property, into: &resource) }
                }
            }
            resources.append(resource)
        }
        return resources
    }

    private typealias Node = UnsafeMutableRawPointer

    private static func read(_ property: Node, into resource: inout DAVResource) {
        let value = text(of: property).trimmingCharacters(in: .whitespacesAndNewlines)
        if isElement(property, ownCloudNamespace, "fileid") {
            if !value.isEmpty { resource.fileID = value }
            return
        }
        guard namespace(of: property) == davNamespace else { return }
        switch name(of: property) {
        case "resourcetype":
            resource.isCollection = children(of: property).contains { isElement($0, davNamespace, "collection") }
        case "getetag": if !value.isEmpty { resource.etag = value }
        case "getcontentlength": resource.contentLength = Int64(value).flatMap { (0...DAVResource.largestLength).contains($0) ? $0 : nil }
        case "getlastmodified": if !value.isEmpty { resource.lastModified = value }
        default: break
        }
    }

    private static func children(of node: Node) -> [Node] {
        var result: [Node] = []
        var child = mamfs_xml_first_element(node)
        while let current = child {
            result.append(current)
            child = mamfs_xml_next_element(current)
        }
        return result
    }

    private static func name(of node: Node) -> String {
        mamfs_xml_name(node).map { String(cString: $0) } ?? ""
    }

    private static func namespace(of node: Node) -> String? {
        mamfs_xml_namespace(node).map { String(cString: $0) }
    }

    private static func isElement(_ node: Node, _ namespace: String, _ name: String) -> Bool {
        self.namespace(of: node) == namespace && self.name(of: node) == name
    }

    private static func text(of node: Node) -> String {
        guard let content = mamfs_xml_text(node) else { return "" }
        defer { mamfs_xml_free_text(content) }
        return String(cString: content)
    }
}
