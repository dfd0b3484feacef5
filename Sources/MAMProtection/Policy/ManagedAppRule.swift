import Foundation

/// One entry of the policy key `managedApps`: which executables are managed apps.
///
/// A process is a managed app when its executable (on Linux `/proc/PID/exe`, the resolved path
/// of the running binary) matches a rule. A script counts as its interpreter (`/usr/bin/python3`
/// running a script is the python3 executable). Mirrors the "allowed apps" list of Windows
/// Information Protection and Intune's "policy managed apps".
public struct ManagedAppRule: Equatable, Hashable, Sendable {
    /// An absolute executable path, or a directory path ending in "/" that matches every
    /// executable below it (at any depth).
    public let path: String
    /// The executable's SHA-256 as 64 lowercase hex digits, or nil to match by path alone.
    public let sha256: String?

    /// - Throws: `MAMError.invalidArguments` for a path that is not absolute, contains a NUL,
    ///   "." or ".." component, or a digest that is not 64 hex digits (stored lowercased).
    public init(path: String, sha256: String? = nil) throws {
        guard path.hasPrefix("/"), !path.contains("\0") else {
            throw MAMError.invalidArguments("managedApps: path '\(InputQuote.short(path))' must be absolute")
        }
        let components = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        if components.dropLast().contains(where: { $0.isEmpty || $0 == "." || $0 == ".." })
            || components.last == "." || components.last == ".." {
            throw MAMError.invalidArguments("managedApps: path '\(InputQuote.short(path))' must be normalised (no //, . or ..)")
        }
        if let sha256 {
            let hex = sha256.lowercased()
            guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit && $0.isASCII }) else {
                throw MAMError.invalidArguments("managedApps: sha256 '\(InputQuote.short(sha256))' must be 64 hex digits")
            }
            self.sha256 = hex
        } else {
            self.sha256 = nil
        }
        self.path = path
    }

    /// True for a rule that names a directory (its path ends in "/").
    public var isDirectoryRule: Bool { path.hasSuffix("/") }

    /// Whether an executable at `executablePath` (absolute, resolved) matches: the same path,
    /// or below the directory of a directory rule; and, when the rule has a digest, the
    /// executable's SHA-256 (`sha256()`, asked only then; nil = unreadable) is that digest.
    public func matches(executablePath: String, sha256 digest: () -> String?) -> Bool {
        let pathMatches = isDirectoryRule ? executablePath.hasPrefix(path) && executablePath.count > path.count
                                          : executablePath == path
        guard pathMatches else { return false }
        guard let sha256 else { return true }
        return digest()?.lowercased() == sha256
    }
}

extension Sequence where Element == ManagedAppRule {
    /// Whether any rule matches (`ManagedAppRule.matches`); the digest is computed at most once.
    public func matches(executablePath: String, sha256 digest: () -> String?) -> Bool {
        var cached: String??
        for rule in self {
            let matched = rule.matches(executablePath: executablePath) {
                if let cached { return cached }
                let value = digest()
                cached = .some(value)
                return value
            }
            if matched { return true }
        }
        return false
    }
}
