import Foundation
import Testing

@Suite("Security: in-place encryption of a hard-linked file is refused")
struct SecurityHardLinkTests {
    @Test("encrypt and protect in place (also -o naming the file itself or its other link) of a file with a second hard link: 73 (too many links), both names keep their bytes and inode")
    func hardLinkedFileIsNotEncryptedInPlace() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let plain = Data("HARDLINK-PLAINTEXT-MARKER\n".utf8)
        let first = try sandbox.write("dir/h1", plain)
        let second = sandbox.path("dir/h2")
        #expect(link(first, second) == 0)
        var before = stat()
        #expect(lstat(first, &before) == 0 && before.st_nlink == 2)
        for arguments in [["encrypt", first, "--account", Fixtures.account],
                          ["encrypt", first, "--account", Fixtures.account, "-o", first],
                          ["encrypt", first, "--account", Fixtures.account, "-o", sandbox.path("dir/./h1")],
                          ["encrypt", first, "--account", Fixtures.account, "-o", second],
                          ["protect", first, "--account", Fixtures.account],
                          ["protect", sandbox.path("dir"), "-R", "--account", Fixtures.account]] {
            let result = try sandbox.run(arguments)
            #expect(result.status == 73, "\(arguments.joined(separator: " ")): \(result.status) \(result.err)")
            #expect(result.err.contains("hard links"), "\(result.err)")
            #expect(try sandbox.read(first) == plain && sandbox.read(second) == plain)
            var after = stat()
            #expect(lstat(first, &after) == 0 && after.st_ino == before.st_ino && after.st_nlink == 2)
        }
        // Encrypting a copy is the way out, and a file with one link is encrypted as before.
        let copy = sandbox.path("copy.enc")
        #expect(try sandbox.run(["encrypt", first, "--account", Fixtures.account, "-o", copy]).status == 0)
        #expect(unlink(second) == 0)
        #expect(try sandbox.run(["encrypt", first, "--account", Fixtures.account]).status == 0)
        #expect(try sandbox.read(first) != plain)
        #expect(try sandbox.run(["decrypt", copy, "-o", "-"]).stdout == plain)
    }

    @Test("protect -R of a tree with one hard-linked file: 73 naming it, and no file of the tree changed (none encrypted, the directory untagged)")
    func treeWithHardLinkIsLeftAlone() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        var files: [String: Data] = [:]
        for name in ["a1", "b2", "c3", "d4", "sub/e5"] {
            let bytes = Data("TREE-PLAINTEXT-\(name)\n".utf8)
            files[name] = bytes
            try sandbox.write("tree/\(name)", bytes)
        }
        #expect(link(sandbox.path("tree/c3"), sandbox.path("elsewhere-c3")) == 0)
        let result = try sandbox.run(["protect", sandbox.path("tree"), "-R", "--account", Fixtures.account])
        #expect(result.status == 73, "\(result.status) \(result.err)")
        #expect(result.err.contains("tree/c3 has 2 hard links"), "\(result.err)")
        for (name, bytes) in files {
            #expect(try sandbox.read(sandbox.path("tree/\(name)")) == bytes, "\(name) changed")
        }
        let info = try jsonArray(try sandbox.run(["info", "--json", sandbox.path("tree"), sandbox.path("tree/a1")]))
        #expect(info.allSatisfy { ($0["owner"] as? String) == nil }, "\(info)")
    }
}
