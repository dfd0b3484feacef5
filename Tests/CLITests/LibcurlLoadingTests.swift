import Foundation
import Testing
import MAMTestSupport

/// libcurl is loaded with dlopen when the WebDAV remote first needs it, not at every start of
/// mamfs. The dynamic loader says which libraries it looks for under LD_DEBUG=libs.
@Suite("CLI: libcurl is loaded on first use")
struct LibcurlLoadingTests {
    /// Runs `arguments` with LD_DEBUG=libs: stderr also lists the libraries the dynamic
    /// loader looked for ("find library=NAME").
    private func librariesSought(_ sandbox: Sandbox, _ arguments: [String], withState: Bool = true) throws -> (ProcessResult, String) {
        let result = try sandbox.run(arguments, withState: withState, environment: ["LD_DEBUG": "libs"])
        return (result, result.err)
    }

    @Test("--version, encrypt and decrypt never load libcurl; diagnose (which reports its version) does")
    func notLoadedUnlessNeeded() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let plain = try sandbox.write("plain.txt", "alpha\n")

        let (version, versionLog) = try librariesSought(sandbox, ["--version"], withState: false)
        #expect(version.status == 0)
        #expect(versionLog.contains("find library=libcrypto.so.3"), "LD_DEBUG=libs shows nothing: \(versionLog.prefix(300))")
        #expect(!versionLog.contains("libcurl.so.4"))

        let (encrypt, encryptLog) = try librariesSought(sandbox, ["encrypt", plain, "--account", Fixtures.upn, "-o", sandbox.path("enc")])
        #expect(encrypt.status == 0)
        #expect(!encryptLog.contains("libcurl.so.4"))
        let (decrypt, decryptLog) = try librariesSought(sandbox, ["decrypt", sandbox.path("enc"), "-o", sandbox.path("dec")])
        #expect(decrypt.status == 0)
        #expect(!decryptLog.contains("libcurl.so.4"))
        #expect(try sandbox.read(sandbox.path("dec")) == Data("alpha\n".utf8))

        let (diagnose, diagnoseLog) = try librariesSought(sandbox, ["diagnose"])
        #expect(diagnose.status == 0)
        #expect(diagnoseLog.contains("find library=libcurl.so.4"))
    }

    @Test("a libcurl.so.4 without libcurl's functions: a WebDAV sync exits 70 naming the missing symbol, the local root untouched")
    func unusableLibcurl() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        // An empty shared object under libcurl's soname, found first through LD_LIBRARY_PATH.
        let fake = sandbox.path("fake-lib")
        try FileManager.default.createDirectory(atPath: fake, withIntermediateDirectories: true)
        let source = try sandbox.write("fake-lib/empty.c", "int mamfs_test_not_libcurl;\n")
        let compile = try runProcess("/usr/bin/env", ["cc", "-shared", "-fPIC", "-o", fake + "/libcurl.so.4", source],
                                     environment: ProcessInfo.processInfo.environment)
        try #require(compile.status == 0, "cc: \(compile.err)")
        let local = sandbox.path("local")
        try sandbox.write("local/keep.txt", "kept\n")

        let sync = try sandbox.run(["provider", "sync", local, "--remote", "http://127.0.0.1:9/dav/", "--account", Fixtures.upn],
                                   environment: ["LD_LIBRARY_PATH": fake])
        #expect(sync.status == 70, "\(sync.err)")
        #expect(sync.err.contains("the WebDAV remote needs libcurl (the libcurl4 package), which cannot be loaded: libcurl.so.4 has no curl_global_init"),
                "\(sync.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: local) == ["keep.txt"])
        #expect(try sandbox.read(local + "/keep.txt") == Data("kept\n".utf8))

        // diagnose still answers, and says why libcurl is not there.
        let diagnose = try sandbox.run(["diagnose", "--json"], environment: ["LD_LIBRARY_PATH": fake])
        #expect(diagnose.status == 0, "\(diagnose.err)")
        let report = try JSONSerialization.jsonObject(with: diagnose.stdout) as? [String: Any]
        let versions = report?["versions"] as? [String: Any]
        #expect((versions?["libcurl"] as? String)?.hasPrefix("not loaded: ") == true, "\(String(describing: versions))")
    }
}
