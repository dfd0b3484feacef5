import Foundation
import Testing

@Suite("CLI: wipe and unenroll")
struct WipeTests {
    /// A tree under `root` with managed, unmanaged-tagged and untagged files.
    struct Tree {
        let managed: [String]
        let unmanaged: [String]
        let untagged: [String]
    }

    func makeTree(_ sandbox: Sandbox, root: String) throws -> Tree {
        let managed = try [
            sandbox.write("\(root)/work/report.txt", "corporate report\n"),
            sandbox.write("\(root)/work/deep/plan.txt", "corporate plan\n"),
            sandbox.write("\(root)/mixed/budget.csv", "1,2,3\n"),
        ]
        let unmanaged = try [sandbox.write("\(root)/mixed/holiday.txt", "personal\n")]
        let untagged = try [sandbox.write("\(root)/mixed/readme.txt", "untagged\n"),
                            sandbox.write("\(root)/other/notes.txt", "notes\n")]
        #expect(try sandbox.run(["protect", sandbox.path("\(root)/work"), "-R", "--account", Fixtures.upn]).status == 0)
        #expect(try sandbox.run(["protect", managed[2], "--account", Fixtures.account]).status == 0)
        #expect(try sandbox.run(["protect", unmanaged[0], "--account", ""]).status == 0)
        return Tree(managed: managed, unmanaged: unmanaged, untagged: untagged)
    }

    @Test("wipe --root removes the account's files, keeps the others, destroys the keys (77 afterwards)")
    func wipeRoot() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        // Files placed after protect, so only --root can find them.
        let tree = try makeTree(sandbox, root: "tree")
        let outside = sandbox.path("elsewhere/report-copy.txt")
        try FileManager.default.createDirectory(atPath: sandbox.path("elsewhere"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: tree.managed[0], toPath: outside)
        let late = try sandbox.write("late/extra.bin", Fixtures.binary(5000))
        #expect(try sandbox.run(["encrypt", late, "--account", Fixtures.account]).status == 0)

        let result = try sandbox.run(["wipe", Fixtures.upn, "--root", sandbox.path("tree"), "--root", sandbox.path("late")])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.stderr.isEmpty, "no progress when stderr is not a terminal")
        #expect(result.out.contains("removed"))
        for path in tree.managed + [late] { #expect(!sandbox.exists(path), "\(path) wiped") }
        for path in tree.unmanaged + tree.untagged { #expect(sandbox.exists(path), "\(path) kept") }
        #expect(try sandbox.read(tree.unmanaged[0]).contains("personal"))
        #expect(try sandbox.read(tree.untagged[0]) == Data("untagged\n".utf8))

        // The copy outside every root still exists but can no longer be read.
        let decrypt = try sandbox.run(["decrypt", outside, "-o", sandbox.path("recovered")])
        #expect(decrypt.status == 77, "\(decrypt.err)")
        #expect(decrypt.errLines.count == 1)
        #expect(decrypt.err.contains("key unavailable"))
        #expect(!sandbox.exists(sandbox.path("recovered")))

        let accounts = try jsonArray(try sandbox.run(["accounts", "--json"]))
        #expect(accounts.first?["managed"] as? Bool == false)
    }

    /// A `decrypt` killed between linking its temp file and renaming it over the file left the
    /// plaintext as `.NAME.mamfs-tmp-*`, and a wipe kept it.
    @Test("wipe removes a rewrite's temp file whose writer is gone beside a file it wipes (a killed decrypt's plaintext); one whose writer runs, one beside another owner's file or none, and other hidden files stay")
    func leftOverTemporaryRemoved() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let tree = try makeTree(sandbox, root: "tree")
        let dead = try #require(Self.exitedPID())
        let leftOver = try sandbox.write("tree/work/.report.txt.mamfs-tmp-p\(dead)-k3x9q", "corporate report\n")
        let running = try sandbox.write("tree/work/.report.txt.mamfs-tmp-p\(getpid())-a1b2c", "being written\n")
        let oldForm = try sandbox.write("tree/work/.report.txt.mamfs-tmp-zz91", "whose?\n")
        let hidden = try sandbox.write("tree/work/.hidden", "mine\n")
        // Named like a left-over but beside a personal file, or beside nothing: not the account's.
        let besidePersonal = try sandbox.write("tree/mixed/.holiday.txt.mamfs-tmp-p\(dead)-q1", "personal\n")
        let besideNothing = try sandbox.write("tree/mixed/.gone.txt.mamfs-tmp-p\(dead)-q2", "mine too\n")

        let result = try sandbox.run(["-v", "wipe", Fixtures.upn, "--root", sandbox.path("tree")])
        #expect(result.status == 0, "\(result.err)")
        #expect(!sandbox.exists(leftOver))
        #expect(result.out.contains(leftOver), "the removal is listed: \(result.out)")
        for path in [running, oldForm, hidden, besidePersonal, besideNothing] { #expect(sandbox.exists(path), "\(path) kept") }
        for path in tree.managed { #expect(!sandbox.exists(path), "\(path) wiped") }
    }

    /// The PID of a child that has exited and been reaped (no process has it now).
    static func exitedPID() -> pid_t? {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        guard posix_spawn(&pid, "/bin/true", nil, nil, argv, nil) == 0 else { return nil }
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { return nil }
        return kill(pid, 0) != 0 && errno == ESRCH ? pid : nil
    }

    @Test("wipe finds protected paths without --root (known roots)")
    func wipeKnownRoots() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let tree = try makeTree(sandbox, root: "known")
        let result = try sandbox.run(["wipe", Fixtures.account])
        #expect(result.status == 0, "\(result.err)")
        for path in tree.managed { #expect(!sandbox.exists(path), "\(path) wiped") }
        for path in tree.unmanaged + tree.untagged { #expect(sandbox.exists(path), "\(path) kept") }
    }

    @Test("protected data of a wiped account cannot be unprotected (77)")
    func wipedData() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let protected = try sandbox.run(["protect-data", "--account", Fixtures.account], stdin: Data("secret".utf8)).stdout
        #expect(try sandbox.run(["wipe", Fixtures.account]).status == 0)
        let result = try sandbox.run(["unprotect-data"], stdin: protected)
        #expect(result.status == 77)
        #expect(result.stdout.isEmpty)
    }

    @Test("wipe of an unknown account exits 77; a --root that does not exist exits 66")
    func wipeErrors() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let unknown = try sandbox.run(["wipe", "nobody@contoso.com"])
        #expect(unknown.status == 77)
        #expect(unknown.errLines.count == 1)
        let missingRoot = sandbox.path("no-root")
        let badRoot = try sandbox.run(["wipe", Fixtures.account, "--root", missingRoot])
        #expect(badRoot.status == 66)
        #expect(badRoot.err == "mamfs: wipe: \(missingRoot): no such directory\n")
        let accounts = try jsonArray(try sandbox.run(["accounts", "--json"]))
        #expect(accounts.first?["managed"] as? Bool == true, "nothing was wiped")
    }

    @Test("unenroll without --wipe keeps files readable; with --wipe removes them")
    func unenroll() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("keep/doc.txt", "still mine\n")
        #expect(try sandbox.run(["protect", file, "--account", Fixtures.account]).status == 0)
        let plain = try sandbox.run(["unenroll", Fixtures.upn])
        #expect(plain.status == 0, "\(plain.err)")
        #expect(sandbox.exists(file))
        let copy = sandbox.path("copy.txt")
        #expect(try sandbox.run(["decrypt", file, "-o", copy]).status == 0)
        #expect(try sandbox.read(copy) == Data("still mine\n".utf8))

        // Enroll again, then unenroll with a wipe.
        let policy = try sandbox.write("p.json", Fixtures.encryptingPolicy)
        #expect(try sandbox.run(["enroll", Fixtures.account, "--policy", policy]).status == 0)
        let wiped = try sandbox.run(["unenroll", Fixtures.account, "--wipe", "--root", sandbox.path("keep")])
        #expect(wiped.status == 0, "\(wiped.err)")
        #expect(wiped.out.contains("Wiped"))
        #expect(!sandbox.exists(file))
        #expect(sandbox.exists(copy))
    }

    /// Every path below `root` (relative, directories with a trailing "/"), sorted.
    func tree(_ root: String) throws -> [String] {
        let names = try FileManager.default.subpathsOfDirectory(atPath: root)
        return names.map { name in
            var isDirectory: ObjCBool = false
            FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isDirectory)
            return isDirectory.boolValue ? name + "/" : name
        }.sorted()
    }

    @Test("wipe removes the directories of the account it leaves empty (tagged, or below a tagged one without a tag of their own) and keeps personal, other owners' and untagged ones, and every non-empty one")
    func wipeRemovesTheAccountsEmptiedDirectories() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let t = "t"
        try sandbox.write("\(t)/work/report.txt", "corporate report\n")
        try sandbox.write("\(t)/work/deep/plan.txt", "corporate plan\n")
        try sandbox.write("\(t)/work/deep/deeper/x.txt", "corporate x\n")
        try FileManager.default.createDirectory(atPath: sandbox.path("\(t)/work/deep/already-empty"), withIntermediateDirectories: true)
        try sandbox.write("\(t)/work/keep/holiday.txt", "personal\n")
        try sandbox.write("\(t)/work/personal/sub/note.txt", "corporate note\n")
        try sandbox.write("\(t)/work/other/y.txt", "corporate y\n")
        try sandbox.write("\(t)/mixed/budget.csv", "1,2,3\n")
        try sandbox.write("\(t)/plain/readme.txt", "untagged\n")
        let steps: [[String]] = [
            ["protect", sandbox.path("\(t)/work"), "-R", "--account", Fixtures.upn],
            ["protect", sandbox.path("\(t)/work/keep/holiday.txt"), "--account", ""],
            ["protect", sandbox.path("\(t)/work/personal"), "-R", "--account", ""],
            ["protect", sandbox.path("\(t)/work/personal/sub/note.txt"), "--account", Fixtures.account],
            ["protect", sandbox.path("\(t)/work/other"), "--account", Fixtures.otherAccount],
            ["protect", sandbox.path("\(t)/mixed/budget.csv"), "--account", Fixtures.account],
        ]
        for step in steps {
            let result = try sandbox.run(step)
            #expect(result.status == 0, "\(step): \(result.err)")
        }
        let before = try tree(sandbox.path(t))
        #expect(before.contains("work/deep/deeper/x.txt") && before.contains("work/deep/already-empty/"))

        let wipe = try sandbox.run(["wipe", Fixtures.account, "--root", sandbox.path(t)])
        #expect(wipe.status == 0, "\(wipe.err)")
        #expect(wipe.out == "Wiped \(Fixtures.account): removed 6 files and 3 directories, destroyed 1 key\n")
        #expect(try tree(sandbox.path(t)) == [
            "mixed/",
            "plain/", "plain/readme.txt",
            "work/",
            "work/keep/", "work/keep/holiday.txt",
            "work/other/",
            "work/personal/", "work/personal/sub/",
        ])
        #expect(try sandbox.read(sandbox.path("\(t)/work/keep/holiday.txt")).contains("personal"))
        let info = try jsonArray(try sandbox.run(["info", "--json", sandbox.path("\(t)/work"), sandbox.path("\(t)/work/other"),
                                                  sandbox.path("\(t)/work/personal")]))
        #expect(info.map { $0["owner"] is NSNull ? "untagged" : ($0["owner"] as? String ?? "?") } == ["untagged", Fixtures.otherAccount, ""],
                "the emptied work directory that still holds others' files loses its tag; the others keep theirs")
    }

    @Test("wipe -v lists each file and directory it removes, on stdout before the summary")
    func verboseWipe() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let file = try sandbox.write("v/work/sub/a.txt", "corporate\n")
        try sandbox.write("v/personal.txt", "mine\n")
        #expect(try sandbox.run(["protect", sandbox.path("v/work"), "-R", "--account", Fixtures.account]).status == 0)
        let wipe = try sandbox.run(["-v", "wipe", Fixtures.account, "--root", sandbox.path("v")])
        #expect(wipe.status == 0, "\(wipe.err)")
        #expect(wipe.out == """
        removed \(file)
        removed \(sandbox.path("v/work/sub"))
        removed \(sandbox.path("v/work"))
        Wiped \(Fixtures.account): removed 1 file and 2 directories, destroyed 1 key

        """)
        #expect(try tree(sandbox.path("v")) == ["personal.txt"])
    }
}
