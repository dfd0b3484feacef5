import Foundation
import Testing
import MAMTestSupport

@Suite("Install: bash completion of verbs, sub-verbs, options and option values")
struct CompletionTests {
    static let script = "/usr/share/bash-completion/completions/mamfs"

    /// What the installed completion offers for the command line `words` (the last word is the
    /// one being completed), as bash would ask it: COMP_WORDS, COMP_CWORD, then `_mamfs`.
    static func complete(_ tree: InstalledTree, _ words: String...) throws -> Set<String> {
        try complete(tree, words: words)
    }

    static func complete(_ tree: InstalledTree, words: [String]) throws -> Set<String> {
        let program = #"source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _mamfs; printf '%s\n' "${COMPREPLY[@]}""#
        // The completion asks the mamfs it completes for its verbs and options: the installed one.
        let path = tree.path("/usr/bin") + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let result = try runProcess("/bin/bash", ["-c", program, "bash", tree.path(script)] + words,
                                    environment: testEnvironment(["PATH": path]))
        guard result.status == 0 else { throw SandboxError.failed("completion of \(words)", result) }
        return Set(result.out.split(separator: "\n").map(String.init))
    }

    @Test("the first word offers exactly the verbs mamfs --help lists")
    func verbs() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let listed = Set(try ManPageTests.listedVerbs().map { String($0.split(separator: " ")[0]) })
        #expect(try Self.complete(tree, "mamfs", "") == listed)
        #expect(try Self.complete(tree, "mamfs", "pro") == ["protect", "protect-data", "provider"])
        #expect(try Self.complete(tree, "mamfs", "--state", "STATE", "acc") == ["accounts"], "after a global option")
        #expect(try Self.complete(tree, "mamfs", "--") .isSuperset(of: ["--state", "--help", "--version"]))
    }

    @Test("a verb group offers exactly its sub-verbs")
    func subVerbs() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let listed = try ManPageTests.listedVerbs().filter { $0.contains(" ") }
        for group in Set(listed.map { String($0.split(separator: " ")[0]) }) {
            let expected = Set(listed.filter { $0.hasPrefix(group + " ") }.map { String($0.split(separator: " ")[1]) })
            #expect(try Self.complete(tree, "mamfs", group, "") == expected, "mamfs \(group)")
        }
    }

    @Test("after a verb, '-' offers exactly the options its --help lists")
    func options() throws {
        let tree = try InstalledTree(prefix: "/usr")
        for verb in try ManPageTests.listedVerbs() {
            let words = ["mamfs"] + verb.split(separator: " ").map(String.init) + ["-"]
            #expect(try Self.complete(tree, words: words) == Set(try ManPageTests.options(of: verb)), "mamfs \(verb) -")
        }
    }

    @Test("option values: provider kinds, location names, mount options after a comma, directories")
    func values() throws {
        let tree = try InstalledTree(prefix: "/usr")
        #expect(try Self.complete(tree, "mamfs", "mount", "b", "m", "--provider", "") == ["non-replicated", "replicated"])
        #expect(try Self.complete(tree, "mamfs", "mount", "b", "m", "--location", "One") == ["OneDriveForBusiness"])
        #expect(try Self.complete(tree, "mamfs", "mount", "b", "m", "-o", "allow_other,pa") == ["allow_other,page_cache"])
        #expect(try Self.complete(tree, "mamfs", "mount", "b", "m", "-o", "lo") == ["log="])
        let directory = try TempDirectory(prefix: "mamfs-completion")
        try FileManager.default.createDirectory(atPath: directory.file("sub"), withIntermediateDirectories: false)
        try Data().write(to: URL(fileURLWithPath: directory.file("subfile")))
        #expect(try Self.complete(tree, "mamfs", "--state", directory.file("su")) == [directory.file("sub")], "directories only")
        #expect(try Self.complete(tree, "mamfs", "info", directory.file("su")) == [directory.file("sub"), directory.file("subfile")])
    }
}
