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

/// The kernel splits paths at every "/" byte; so must `PathName`, also where Swift would see
/// one Character ("/" followed by a combining mark) or two equal Strings (NFC and NFD).
@Suite("PathName splits and compares bytes, not Characters")
struct PathNameScalarTests {
    static let combining = "u/a/\u{301}x.sh"

    @Test("a slash followed by a combining mark still ends a component")
    func combiningMarkAfterASlash() {
        #expect(PathName.parent(of: Self.combining) == "u/a")
        #expect(PathName.lastComponent(of: Self.combining) == "\u{301}x.sh")
        #expect(!PathName.lastComponent(of: Self.combining).utf8.contains(UInt8(ascii: "/")))
        #expect(PathName.normalized("/r/a/\u{301}b/../c") == "/r/a/c")
        #expect(PathName.appending("x", to: "/r/\u{301}") == "/r/\u{301}/x")
    }

    @Test("relative(_:below:) compares bytes: a canonically equal root is not the root")
    func relativeBelowComparesBytes() {
        #expect(PathName.relative("/r/a/b", below: "/r") == "a/b")
        #expect(PathName.relative("/r/a", below: "/r/") == "a")
        #expect(PathName.relative("/r", below: "/r") == nil)
        #expect(PathName.relative("/rx/a", below: "/r") == nil)
        #expect(PathName.relative("/r/\u{301}x", below: "/r") == "\u{301}x")
        // "é" precomposed and "e" + combining acute are equal Strings, different bytes.
        #expect(PathName.relative("/caf\u{e9}/a", below: "/cafe\u{301}") == nil)
    }
}
