/// Lexical path manipulation on plain strings (no filesystem access, no symlink resolution).
///
/// Works on Unicode scalars, never on `Character`s or with `String`'s `==`: a "/" followed by
/// a combining mark is one Character, and two names that differ only in normalization compare
/// equal as Strings, while the kernel splits and compares bytes. A name with a slash inside
/// must never pass for a single component.
///
/// Used instead of `NSString`'s path API, which on this platform's Foundation traps on some
/// inputs (`("f" as NSString).deletingLastPathComponent` crashes with an illegal instruction)
/// and answers "" for a bare name where a caller needs ".".
public enum PathName {
    /// The parent of `path`, lexically: "a/b/c" -> "a/b", "/a" -> "/", "/" -> "/",
    /// "a/b/" -> "a". A bare name's parent ("c" -> "", and "" -> "") is the empty path: the
    /// directory the path is relative to (a provider's root, for provider-relative paths;
    /// `directory(of:)` spells it "." for paths relative to the working directory).
    public static func parent(of path: String) -> String {
        let trimmed = trimTrailingSlashes(path).unicodeScalars
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        let head = trimTrailingSlashes(String(Substring(trimmed[..<slash])))
        return head.isEmpty ? "/" : head
    }

    /// The directory part of `path` as a path that can be opened: `parent(of:)`, with "." for
    /// a bare name ("a/b" -> "a", "f" -> ".", "/f" -> "/", "a/b/" -> "a", "" -> ".").
    public static func directory(of path: String) -> String {
        let parent = parent(of: path)
        return parent.isEmpty ? "." : parent
    }

    /// The last component of `path`: "a/b" -> "b", "/a/b/" -> "b", "f" -> "f", "/" -> "/".
    public static func lastComponent(of path: String) -> String {
        let trimmed = trimTrailingSlashes(path)
        let scalars = trimmed.unicodeScalars
        if scalars.elementsEqual("/".unicodeScalars) { return "/" }
        guard let slash = scalars.lastIndex(of: "/") else { return trimmed }
        return String(Substring(scalars[scalars.index(after: slash)...]))
    }

    /// `path` below the directory `root` ("/r/a/b" below "/r" -> "a/b"), compared byte for
    /// byte; nil when `path` is `root` itself or lies elsewhere.
    public static func relative(_ path: String, below root: String) -> String? {
        var prefix = Array(root.utf8)
        if prefix.last != UInt8(ascii: "/") { prefix.append(UInt8(ascii: "/")) }
        let bytes = Array(path.utf8)
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else { return nil }
        return String(decoding: bytes[prefix.count...], as: UTF8.self)
    }

    /// `path` + "/" + `component`, without doubling the slash.
    public static func appending(_ component: String, to path: String) -> String {
        if path.isEmpty { return component }
        return path.unicodeScalars.last == "/" ? path + component : path + "/" + component
    }

    /// `path` with repeated slashes, "." components and trailing slashes removed and ".."
    /// resolved lexically ("/a/./b//../c/" -> "/a/c"). A relative path stays relative.
    public static func normalized(_ path: String) -> String {
        let absolute = path.unicodeScalars.first == "/"
        func isDotDot(_ part: Substring.UnicodeScalarView) -> Bool { part.elementsEqual("..".unicodeScalars) }
        var parts: [Substring.UnicodeScalarView] = []
        for part in path.unicodeScalars.split(separator: "/", omittingEmptySubsequences: true) {
            if part.elementsEqual(".".unicodeScalars) { continue }
            if isDotDot(part), let last = parts.last, !isDotDot(last) {
                parts.removeLast()
                continue
            }
            if isDotDot(part), absolute { continue }
            parts.append(part)
        }
        let joined = parts.map { String(Substring($0)) }.joined(separator: "/")
        if absolute { return "/" + joined }
        return joined.isEmpty ? "." : joined
    }

    private static func trimTrailingSlashes(_ path: String) -> String {
        var result = Substring(path).unicodeScalars
        while result.count > 1, result.last == "/" { result = result.dropLast() }
        return String(Substring(result))
    }
}
