import MAMProtection

/// A mount that failed in the background daemon, reported to the waiting parent.
public struct MountFailure: Error, CustomStringConvertible, Sendable {
    /// One line saying why, for stderr.
    public let description: String
    /// What the CLI exits with.
    public let exitCode: ExitCode
}
