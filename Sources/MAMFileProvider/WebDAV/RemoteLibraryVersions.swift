import CCurl
import CXMLTree

/// The versions of the libraries the WebDAV remote runs on, for `mamfs diagnose`.
public enum RemoteLibraryVersions {
    /// `["libcurl": "7.88.1", "libxml2": "21004"]`: libcurl's `curl_version_info` version and
    /// libxml2's `xmlParserVersion` (major * 10000 + minor * 100 + patch), of the libraries
    /// linked in at run time.
    public static var all: [String: String] {
        var versions: [String: String] = [:]
        if let version = mamfs_curl_version_number() { versions["libcurl"] = String(cString: version) }
        if let version = mamfs_xml_version() { versions["libxml2"] = String(cString: version) }
        return versions
    }
}
