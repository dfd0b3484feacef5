import Foundation

/// What a finished process left: its exit status and everything it wrote.
public struct ProcessResult: Sendable {
    /// The exit status; 128 + N when killed by signal N; 124 when the runner's timeout killed it.
    public let status: Int32
    /// Every byte written to stdout.
    public let stdout: Data
    /// Every byte written to stderr.
    public let stderr: Data

    public init(status: Int32, stdout: Data, stderr: Data) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    /// stdout as UTF-8 (invalid bytes replaced).
    public var out: String { String(decoding: stdout, as: UTF8.self) }
    /// stderr as UTF-8 (invalid bytes replaced).
    public var err: String { String(decoding: stderr, as: UTF8.self) }
    /// stderr split into lines, without empty ones.
    public var errLines: [String] { err.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
}
