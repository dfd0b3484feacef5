import Foundation

/// An `ExecutableIdentity` for an executable file at a known path; its digest is the SHA-256
/// of the file's bytes, computed when asked (the path is read again each time).
public struct ExecutableFile: ExecutableIdentity {
    public let path: String

    /// - Parameter path: the absolute, resolved path of the executable.
    public init(path: String) {
        self.path = path
    }

    /// This process's executable (`/proc/self/exe` resolved), or `fallback` when /proc is not
    /// there. The CLI is a caller of its own: `mamfs decrypt` asks the rules as this executable.
    public static func current(fallback: String = CommandLine.arguments.first ?? "mamfs") -> ExecutableFile {
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? fallback
        return ExecutableFile(path: resolved)
    }

    /// The file's SHA-256 (lowercase hex), nil when it cannot be read.
    public func sha256() -> String? {
        try? SHA256.hex(ofFileAt: path)
    }
}
