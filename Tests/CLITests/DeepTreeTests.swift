import Foundation
import Testing
import MAMTestSupport

/// Trees deeper than `TreeDepth.maximum` levels (made by name-relative calls: no path names
/// their bottom): a recursive protect refuses them before it changes anything, and a wipe
/// names what it could not reach, instead of either running out of stack.
@Suite("CLI: trees deeper than any path")
struct DeepTreeTests {
    static let levels = 20_000

    /// `levels` nested directories "d" below `root/deep`, a file `f` with `text` at the bottom.
    static func makeDeepTree(_ sandbox: Sandbox, _ relative: String, text: String) throws {
        let script = """
        import os, sys
        os.makedirs(sys.argv[1]); os.chdir(sys.argv[1])
        for i in range(int(sys.argv[2])):
            os.mkdir("d"); os.chdir("d")
        open("f", "w").write(sys.argv[3])
        """
        let r = try runProcess("/usr/bin/python3", ["-c", script, sandbox.path(relative), "\(levels)", text],
                               stdin: Data(), environment: sandbox.environment)
        try #require(r.status == 0, "\(r.err)")
    }

    static func removeDeepTree(_ sandbox: Sandbox, _ relative: String) {
        _ = try? runProcess("/bin/rm", ["-rf", sandbox.path(relative)], stdin: Data(), environment: sandbox.environment)
    }

    @Test("protect -R of a tree deeper than 1,024 levels is refused (74) naming the depth, and tags nothing")
    func protectRefusesDeepTree() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        try Self.makeDeepTree(sandbox, "tree/deep", text: "bottom\n")
        defer { Self.removeDeepTree(sandbox, "tree") }
        let result = try sandbox.run(["protect", sandbox.path("tree"), "-R", "--account", Fixtures.account])
        #expect(result.status == 74, "\(result.status) \(result.err.prefix(300))")
        #expect(result.err.contains("more than 1024 directory levels"), "\(result.err.prefix(300))")
        let tag = try runProcess("/usr/bin/getfattr", ["--only-values", "-n", "user.mam.owner", sandbox.path("tree")],
                                 stdin: Data(), environment: sandbox.environment)
        #expect(tag.status != 0, "the refused protect left no tag: \(tag.out)")
    }

    @Test("a wipe below a tree deeper than 1,024 levels wipes what it reaches and names where it stopped")
    func wipeNamesDeepTree() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let near = try sandbox.write("root/near.txt", "near\n")
        #expect(try sandbox.run(["encrypt", near, "--account", Fixtures.account]).status == 0)
        try Self.makeDeepTree(sandbox, "root/deep", text: "bottom\n")
        defer { Self.removeDeepTree(sandbox, "root") }
        let result = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path("root")])
        #expect(result.status == 0, "\(result.status) \(result.err.prefix(300))")
        #expect(!sandbox.exists(near), "the file it reaches is wiped")
        #expect(result.err.contains("not examined: more than 1024 directory levels below the root"), "\(result.err.prefix(300))")
        #expect(result.out.contains("1 entry not examined"), "\(result.out)")
    }
}
