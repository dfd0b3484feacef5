import Foundation
import Testing
@testable import MAMProtection
import MAMTestSupport

@Suite("PathName")
struct PathNameTests {
    @Test("directory and last component of every path shape, including one-character names (Foundation traps on those)",
          arguments: [("f", ".", "f"), ("ab", ".", "ab"), ("./f", ".", "f"), ("/f", "/", "f"), ("/", "/", "/"),
                      ("a/b", "a", "b"), ("a/b/", "a", "b"), ("/a//b", "/a", "b"), ("", ".", "")])
    func components(path: String, directory: String, last: String) {
        #expect(PathName.directory(of: path) == directory)
        #expect(PathName.lastComponent(of: path) == last)
    }

    @Test("normalized removes dots, doubled and trailing slashes, and resolves .. lexically")
    func normalized() {
        #expect(PathName.normalized("/a/./b//../c/") == "/a/c")
        #expect(PathName.normalized("a/../..") == "..")
        #expect(PathName.normalized("/..") == "/")
        #expect(PathName.normalized("./") == ".")
        #expect(PathName.appending("x", to: "/a/") == "/a/x")
        #expect(PathName.appending("x", to: "a") == "a/x")
    }

    @Test("encrypting a file named by a one-character relative path works (regression: Foundation trap)")
    func oneCharacterRelativePath() throws {
        let f = try StateFixture()
        try f.write("f", Array("x".utf8))
        let previous = FileManager.default.currentDirectoryPath
        #expect(FileManager.default.changeCurrentDirectoryPath(f.work))
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
        try f.context.files.encryptFile(path: "f", forAccountId: StateFixture.managedId)
        #expect(try f.context.files.isFileEncrypted(path: f.path("f")))
        try f.context.files.decryptFile(path: "f")
        #expect(try f.read(f.path("f")) == Array("x".utf8))
    }
}
