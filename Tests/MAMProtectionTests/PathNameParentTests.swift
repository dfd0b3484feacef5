import MAMProtection
import Testing

@Suite("PathName.parent")
struct PathNameParentTests {
    @Test("parent of a path, lexically", arguments: [
        ("a/b/c", "a/b"), ("a/b", "a"), ("/a/b", "/a"), ("/a", "/"), ("/", "/"),
        ("a/b/", "a"), ("a//b", "a"), ("//a", "/"),
    ])
    func parent(path: String, parent: String) {
        #expect(PathName.parent(of: path) == parent)
    }

    @Test("a bare name's parent is the empty path; directory(of:) spells it \".\"", arguments: ["c", "", "name with spaces", ".."])
    func bareName(path: String) {
        #expect(PathName.parent(of: path) == "")
        #expect(PathName.directory(of: path) == ".")
    }
}
