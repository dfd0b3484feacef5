import Foundation
import Glibc
import Testing
import MAMTestSupport

/// A directory tree far deeper than any path can name, made in the backing directory: the walks
/// of an owner change (the caller's check, the protect and the look before it) hold a stack
/// frame and a descriptor per level on a FUSE worker thread, and a deep enough tree crashed the
/// daemon for every user of the mount. They stop at `TreeDepth.maximum` levels with
/// ENAMETOOLONG and change nothing.
@Suite("Security: a tree too deep for any path does not crash the daemon")
struct SecurityDeepTreeTests {
    static let levels = 20_000

    /// Makes `levels` nested directories "d" below `root/deep` (python: no path is ever longer
    /// than one name), owned by `owner`.
    static func makeDeepTree(_ root: String, owner: String, environment: [String: String]) throws {
        let script = """
        import os, sys
        os.chdir(sys.argv[1]); os.mkdir("deep"); os.chdir("deep")
        uid = int(sys.argv[3])
        os.chown(".", uid, uid)
        for i in range(int(sys.argv[2])):
            os.mkdir("d"); os.chown("d", uid, uid); os.chdir("d")
        open("f", "w").write("deep\\n"); os.chown("f", uid, uid)
        """
        let r = try shell("python3 -c \(shellQuote(script)) \(shellQuote(root)) \(levels) \(owner)", environment: environment, timeout: 300)
        try #require(r.status == 0, "\(r.err)")
    }

    @Test("an owner change of a tree deeper than 1,024 levels fails with ENAMETOOLONG, for root and for a user; the daemon stays up",
          .enabled(if: geteuid() == 0, "acts as user nobody"))
    func deepTreeOwnerChange() throws {
        try withMount(.managed, options: ["allow_other"]) { m in
            defer { _ = try? shell("rm -rf \(shellQuote(m.backing + "/u"))", environment: m.environment, timeout: 300) }
            let setUp = try m.sh("chmod 755 \"$BASE\" && mkdir u && chown nobody:nogroup u")
            try #require(setUp.status == 0, "\(setUp.err)")
            try Self.makeDeepTree(m.backing + "/u", owner: "65534", environment: m.environment)
            let asRoot = try m.sh("setfattr -n user.mam.owner -v \(MountedFixture.account) u/deep 2>&1; echo \"rc=$?\"")
            #expect(asRoot.out.contains("File name too long") && asRoot.out.hasSuffix("rc=1\n"), "\(asRoot.out)")
            let asNobody = try m.sh("""
            setpriv --reuid=65534 --regid=65534 --clear-groups setfattr -n user.mam.owner -v \(MountedFixture.account) u/deep 2>&1; echo "rc=$?"
            """)
            #expect(asNobody.out.contains("File name too long") && asNobody.out.hasSuffix("rc=1\n"), "\(asNobody.out)")
            // The daemon still answers, and nothing was tagged.
            let after = try m.sh("ls u && getfattr --only-values -n user.mam.owner u/deep 2>&1 | grep -c 'No such attribute'")
            #expect(after.status == 0 && after.out == "deep\n1\n", "\(after.out) \(after.err)")
        }
    }
}
