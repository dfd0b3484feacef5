import Foundation
import Testing
@testable import MAMFileProvider
@testable import MAMProtection

/// The WebDAV store's URL building, href decoding and multistatus parsing, on fixed inputs.
@Suite("WebDAV parsing")
struct WebDAVParsingTests {
    @Test("URLs percent-encode every byte that is not unreserved; hrefs decode back to the exact bytes")
    func pathsRoundTrip() throws {
        let path = try DAVPath(baseURL: "http://127.0.0.1:8080/my%20dav")
        #expect(path.url(.rootContainer) == "http://127.0.0.1:8080/my%20dav/")
        #expect(path.url(ItemIdentifier("a b/#?%/caf\u{E9}")) == "http://127.0.0.1:8080/my%20dav/a%20b/%23%3F%25/caf%C3%A9")
        #expect(path.url(ItemIdentifier("cafe\u{301}"), collection: true) == "http://127.0.0.1:8080/my%20dav/cafe%CC%81/")
        #expect(path.identifier(href: "/my%20dav/a%20b/%23%3F%25/caf%C3%A9") == ItemIdentifier("a b/#?%/caf\u{E9}"))
        #expect(path.identifier(href: "http://127.0.0.1:8080/my%20dav/dir/") == ItemIdentifier("dir"))
        #expect(path.identifier(href: "/my%20dav/") == .rootContainer)
        #expect(path.identifier(href: "/my%20dav") == .rootContainer)
        #expect(path.identifier(href: "/other/x") == nil, "outside the base")
        #expect(path.identifier(href: "/my%20dav/a/../../etc") == nil, "a '..' component")
        #expect(path.identifier(href: "/my%20dav/%FF%FE") == nil, "not UTF-8")
        #expect(path.identifier(href: "/my%20dav/bad%2") == nil, "broken percent-encoding")
        let nfd = try #require(path.identifier(href: "/my%20dav/cafe%CC%81"))
        #expect(Array(nfd.rawValue.utf8) == Array("cafe\u{301}".utf8))
        #expect(nfd != ItemIdentifier("caf\u{E9}"))
    }

    @Test("a multistatus gives each response's 200 properties; an external entity is not expanded")
    func multistatus() throws {
        let body = Array("""
            <?xml version="1.0" encoding="utf-8"?>
            <!DOCTYPE m [<!ENTITY leak SYSTEM "file:///etc/hostname">]>
            <D:multistatus xmlns:D="DAV:" xmlns:oc="http://owncloud.org/ns">
            <D:response><D:href>/dav/</D:href><D:propstat><D:prop>
              <D:resourcetype><D:collection/></D:resourcetype><D:getetag>W/"1000-1"</D:getetag>
            </D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
            <D:response><D:href>/dav/a%20b</D:href>
              <D:propstat><D:prop><D:resourcetype/><D:getetag>"3-2"</D:getetag><D:getcontentlength>3</D:getcontentlength>
                <D:getlastmodified>Wed, 02 Dec 2026 00:46:10 GMT</D:getlastmodified><oc:fileid>42</oc:fileid></D:prop>
                <D:status>HTTP/1.1 200 OK</D:status></D:propstat>
              <D:propstat><D:prop><D:getcontentlength>999</D:getcontentlength></D:prop>
                <D:status>HTTP/1.1 404 Not Found</D:status></D:propstat></D:response>
            <D:response><D:href>/dav/&leak;x</D:href><D:propstat><D:prop><D:getetag>"1"</D:getetag></D:prop>
              <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
            </D:multistatus>
            """.utf8)
        let resources = try #require(MultiStatusParser.parse(body))
        #expect(resources.count == 3)
        #expect(resources[0] == DAVResource(href: "/dav/", isCollection: true, etag: "W/\"1000-1\""))
        #expect(resources[1] == DAVResource(href: "/dav/a%20b", isCollection: false, etag: "\"3-2\"", contentLength: 3,
                                            lastModified: "Wed, 02 Dec 2026 00:46:10 GMT", fileID: "42"))
        let hostname = (try? String(contentsOfFile: "/etc/hostname", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        #expect(hostname.isEmpty || !resources[2].href.contains(hostname), "the external entity was expanded: \(resources[2].href)")
        #expect(MultiStatusParser.parse(Array("<html>not dav</html>".utf8)) == nil)
        #expect(MultiStatusParser.parse(Array("<D:multistatus xmlns:D=\"DAV:\">".utf8)) == nil)
        #expect(WebDAVRemote.contentVersion(etag: "W/\"3-2\"") == "\"3-2\"")
    }
}
