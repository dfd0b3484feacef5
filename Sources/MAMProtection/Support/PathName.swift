/// Lexical path manipulation on plain strings (no filesystem access, no symlink resolution).
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
        let trimmed = trimTrailingSlashes(path)
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        let head = trimTrailingSlashes(String(trimmed[..<slash]))
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
        if trimmed == "/" { return "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// `path` + "/" + `component`, without doubling the slash.
    public static func appending(_ component: String, to path: String) -> String {
        if path.isEmpty { return component }
        return path.hasSuffix("/") ? path + component : path + "/" + component
    }

    /// `path` with repeated slashes, "." components and trailing slashes removed and ".."
    /// resolved lexically ("/a/./b//../c/" -> "/a/c"). A relative path stays relative.
    public static func normalized(_ path: String) -> String {
        let absolute = path.hasPrefix("/")
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
                continue
            }
            if part == "..", absolute { continue }
            parts.append(part)
        }
        let joined = parts.joined(separator: "/")
        if absolute { return "/" + joined }
        return joined.isEmpty ? "." : joined
    }

    private static func trimTrailingSlashes(_ path: String) -> String {
        var result = Substring(path)
        while result.count > 1, result.hasSuffix("/") { result = result.dropLast() }
        return String(result)
    }
}
