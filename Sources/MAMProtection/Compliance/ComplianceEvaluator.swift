import Foundation

/// Runs a policy's compliance checks (and remediations) on this workstation.
///
/// Sources are the real ones; tests of a single mechanism may point gsettings and apt's files
/// elsewhere (internal initializer) to reach the branches this machine does not have.
struct ComplianceEvaluator: Sendable {
    /// Directories `encryptedBackingDevice` looks at (each must be on dm-crypt).
    var directories: [String]
    var gsettingsPaths = ScreenLockCheck.gsettingsPaths
    var packageSources = PackageUpdateCheck.Sources()
    var now: @Sendable () -> Date = { Date() }

    init(directories: [String]) {
        self.directories = directories
    }

    /// One outcome per check, in policy order.
    func evaluate(_ checks: [ComplianceCheck]) -> [ComplianceOutcome] {
        checks.map(evaluate)
    }

    func evaluate(_ check: ComplianceCheck) -> ComplianceOutcome {
        switch check.kind {
        case .encryptedBackingDevice:
            guard !directories.isEmpty else {
                return ComplianceOutcome(check: check.displayName, status: .notCompliant,
                                         reason: "no backing directory to check (mount the account's backing directory once, or give --path DIR)")
            }
            let outcomes = directories.map { EncryptedDeviceCheck.evaluate(directory: $0) }
            return outcomes.first { $0.status != .compliant } ?? outcomes[0]
        case .screenLockEnabled:
            return ScreenLockCheck.evaluate(gsettingsPaths: gsettingsPaths)
        case .packagesUpdatedWithinDays(let days):
            return PackageUpdateCheck.evaluate(days: days, now: now(), sources: packageSources)
        case .command(let argv, let timeout):
            return Self.runProgram(argv, timeout: timeout, check: check.displayName)
        }
    }

    /// Runs a check's or remediation's program: its exit status mapped by
    /// `ComplianceStatus.forCommandExit`, a timeout or a failure to start ServiceFailure; the
    /// reason is the first line of its stdout (or what happened when it printed none).
    static func runProgram(_ argv: [String], timeout: Double, check: String) -> ComplianceOutcome {
        let (ending, line) = ComplianceProgram.run(argv, timeout: timeout)
        let said = InputQuote.short(line, limit: 200)
        switch ending {
        case .exited(let code):
            let status = ComplianceStatus.forCommandExit(code)
            return ComplianceOutcome(check: check, status: status, reason: said.isEmpty ? "\(argv[0]) exited \(code)" : said)
        case .signalled(let signal):
            return ComplianceOutcome(check: check, status: .serviceFailure,
                                     reason: "\(argv[0]) was killed by signal \(signal)" + (said.isEmpty ? "" : ": \(said)"))
        case .timedOut:
            return ComplianceOutcome(check: check, status: .serviceFailure,
                                     reason: "\(argv[0]) timed out after \(ComplianceCheck.numberText(timeout)) s" + (said.isEmpty ? "" : ": \(said)"))
        case .notStarted(let code):
            return ComplianceOutcome(check: check, status: .serviceFailure,
                                     reason: "cannot run \(argv[0]): \(String(cString: strerror(code)))")
        }
    }
}
