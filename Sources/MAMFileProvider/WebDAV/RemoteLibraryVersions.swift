import CCurlLoader
import CXMLTree

/// The versions of the libraries the WebDAV remote runs on, for `mamfs diagnose`.
public enum RemoteLibraryVersions {
    /// `["libcurl": "7.88.1", "libxml2": "21004"]`: libcurl's `curl_version_info` version and
    /// libxml2's `xmlParserVersion` (major * 10000 + minor * 100 + patch), of the libraries
    /// linked in at run time. libcurl is loaded for the purpose (it is otherwise loaded on
    /// first use); when it cannot be, its entry says so: "not loaded: <the loader's reason>".
    public static var all: [String: String] {
        var versions: [String: String] = [:]
        do {
            try HTTPClient.loadLibcurl()
            if let version = mamfs_curl_version_number() { versions["libcurl"] = String(cString: version) }
        } catch {
            versions["libcurl"] = "not loaded: \(error)"
        }
        if let version = mamfs_xml_version() { versions["libxml2"] = String(cString: version) }
        return versions
    }
}
