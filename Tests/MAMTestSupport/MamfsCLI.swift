import Foundation

/// Runs the built `mamfs` (see `MamfsBinary`) on a state directory, and sets a state up the
/// way a user would: `mamfs init`, then `mamfs enroll` of an account with a policy file.
public enum MamfsCLI {
    /// The account the mount fixtures enroll (with `encryptingPolicy`).
    public static let managedAccount = "8c7f3e1a-0000-4000-8000-00000000a11c"
    /// An account the mount fixtures never enroll.
    public static let otherAccount = "8c7f3e1a-0000-4000-8000-00000000b0b0"

    /// The policy `enroll` gets: the managed account's files are encrypted, through a mount
    /// and in a file provider.
    public static let encryptingPolicy = #"{"fileEncryptionRequired": true, "fileProviderEncryptFiles": true}"#

    /// Runs `mamfs ARGUMENTS --state STATE` (environment: `testEnvironment()`).
    /// - Parameter check: when true, a non-zero exit throws.
    /// - Throws: `TestSupportError` naming the arguments, the status and stderr.
    @discardableResult
    public static func run(_ arguments: [String], state: String, check: Bool = true,
                           timeout: TimeInterval = 300) throws -> ProcessResult {
        let result = try runProcess(MamfsBinary.path, arguments + ["--state", state], environment: testEnvironment(),
                                    timeout: timeout)
        if check && result.status != 0 {
            throw TestSupportError("mamfs \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.err)")
        }
        return result
    }

    /// `mamfs init` of `state`, then `mamfs enroll ACCOUNT --policy FILE` with `policy`
    /// (default `encryptingPolicy`) written to `policyFile`.
    /// - Throws: `TestSupportError` when a step fails.
    public static func initAndEnroll(state: String, account: String, policyFile: String, policy: String = encryptingPolicy) throws {
        try Data(policy.utf8).write(to: URL(fileURLWithPath: policyFile))
        try run(["init"], state: state)
        try run(["enroll", account, "--policy", policyFile], state: state)
    }
}
