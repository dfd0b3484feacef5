// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "mamfs",
    products: [
        .executable(name: "mamfs", targets: ["mamfs"]),
        .library(name: "MAMProtection", targets: ["MAMProtection"]),
        .library(name: "MAMFS", targets: ["MAMFS"]),
    ],
    targets: [
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        // HTTP(S) for the WebDAV remote store, and the XML of its PROPFIND replies. libcurl's
        // headers only (they are on the compiler's multiarch include path; no pkgConfig, whose
        // -lcurl would load libcurl and its thirty dependencies at every start of mamfs):
        // CCurlLoader loads the library with dlopen the first time the remote needs it.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "CCurlLoader", dependencies: ["CCurl"]),
        .systemLibrary(name: "CLibXML2", path: "Sources/CLibXML2", pkgConfig: "libxml-2.0",
                       providers: [.apt(["libxml2-dev"])]),
        // libxml2 behind an opaque C interface (its headers cannot be imported next to Foundation's).
        .target(name: "CXMLTree", dependencies: ["CLibXML2"]),
        .systemLibrary(name: "CSystem", path: "Sources/CSystem"),
        .systemLibrary(name: "CFuse", path: "Sources/CFuse", pkgConfig: "fuse3",
                       providers: [.apt(["libfuse3-dev"])]),
        // The libfuse session's /dev/fuse transport (C: it edits the INIT reply libfuse sends).
        .target(name: "CFuseTransport", dependencies: ["CFuse"]),
        .target(name: "MAMSystem", dependencies: ["CSystem"]),
        // AES-256-GCM through OpenSSL's provider interface (C: it calls the provider's dispatch table).
        .target(name: "CCipher", dependencies: ["COpenSSL"]),
        .target(name: "MAMProtection", dependencies: ["COpenSSL", "CCipher", "CSQLite", "CSystem", "MAMSystem"]),
        .target(name: "MAMFileProvider", dependencies: ["MAMProtection", "MAMSystem", "CCurl", "CCurlLoader", "CXMLTree"]),
        // Session-bus signals and desktop notifications (libdbus-1, the reference implementation).
        .systemLibrary(name: "CDBus", path: "Sources/CDBus", pkgConfig: "dbus-1",
                       providers: [.apt(["libdbus-1-dev"])]),
        .target(name: "MAMBus", dependencies: ["MAMProtection", "CDBus"]),
        .target(name: "MAMFS", dependencies: ["MAMFileProvider", "MAMProtection", "MAMSystem", "MAMBus", "CFuse", "CFuseTransport", "CSystem"]),
        .executableTarget(name: "mamfs", dependencies: ["MAMFS", "MAMFileProvider", "MAMProtection", "MAMSystem", "MAMBus"]),
        // Helpers every test target shares (process runner, fixtures, unmounting): a library,
        // not a test target, so the test targets can import it.
        .target(name: "MAMTestSupport", dependencies: ["MAMProtection", "MAMFileProvider", "MAMBus", "CSystem"], path: "Tests/MAMTestSupport"),
        .testTarget(name: "MAMSystemTests", dependencies: ["MAMSystem", "MAMTestSupport"]),
        .testTarget(name: "MAMProtectionTests", dependencies: ["MAMProtection", "MAMTestSupport"]),
        .testTarget(name: "MAMFileProviderTests", dependencies: ["MAMFileProvider", "MAMProtection", "MAMTestSupport"]),
        .testTarget(name: "CLITests", dependencies: ["MAMProtection", "MAMTestSupport"]),
        .testTarget(name: "CommandLineTests", dependencies: ["mamfs", "MAMProtection"]),
        .testTarget(name: "MAMFSTests", dependencies: ["MAMFS", "CFuseTransport", "MAMProtection", "MAMTestSupport"]),
        .testTarget(name: "RobustnessTests", dependencies: ["MAMProtection", "MAMTestSupport"], exclude: ["Scripts", "Regressions"]),
    ],
    swiftLanguageModes: [.v6]
)
