import Foundation
import MAMProtection

/// `policy show` and `policy set`: reading and replacing a managed account's policy.
enum PolicyCommands {
    static let show = Verb(
        "policy show",
        usage: ["mamfs policy show ACCOUNT [--json] [--state DIR]"],
        summary: "Show the policy of the managed account ACCOUNT (accountId or UPN).",
        options: ["--json                  print the policy as JSON (the schema of docs/POLICY.md)"],
        spec: ArgumentSpec(flags: ["--json"], positionals: 1...1),
        run: runShow)

    static let set = Verb(
        "policy set",
        usage: ["mamfs policy set ACCOUNT POLICY.json [--state DIR]"],
        summary: "Replace the policy of the managed account ACCOUNT (accountId or UPN) with POLICY.json. Running mounts apply it without remounting.",
        spec: ArgumentSpec(positionals: 2...2),
        run: runSet)

    /// The `mamfs policy --help` text: both sub-verbs.
    static var groupHelp: String {
        """
        usage: mamfs policy show ACCOUNT [--json] [--state DIR]
               mamfs policy set ACCOUNT POLICY.json [--state DIR]

        Show or replace the policy of a managed account. See 'mamfs policy show --help' and
        'mamfs policy set --help'.

        """
    }

    static func runShow(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let context = try invocation.openContext()
        let identity = try attempt(account) { try context.resolveAccount(account) }
        let policy = try attempt(account) { try context.enrollment.policy(of: account) }
        if arguments.flag("--json") {
            Output.bytes(policy.jsonData())
            return ExitCode.ok
        }
        var rows: [[String]] = [
            ["account:", identity.description],
            ["fileEncryptionRequired:", String(policy.fileEncryptionRequired)],
            ["fileProviderEncryptFiles:", String(policy.fileProviderEncryptFiles)],
            ["receiveData:", policy.receiveData.rawValue],
            ["saveToLocations:", list(policy.saveToLocations.map(\.rawValue))],
            ["openFromLocations:", list(policy.openFromLocations.map(\.rawValue))],
        ]
        if policy.fileProtectionLevel != .none { rows.append(["fileProtectionLevel:", policy.fileProtectionLevel.rawValue]) }
        Output.out(Output.table(rows))
        return ExitCode.ok
    }

    static func runSet(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let path = arguments.positionals[1]
        let policy = try readPolicy(path)
        let context = try invocation.openContext()
        CommandEvents.attach(to: context, invocation)
        try attempt(account) { try context.enrollment.setPolicy(account, policy) }
        let accountId = (try? context.resolveAccount(account))?.accountId ?? AccountIdentity.canonical(account)
        CommandAudit.record(context, action: "policy set", path: accountId, owner: accountId)
        Output.line("Set the policy of \(account) from \(path)")
        return ExitCode.ok
    }

    /// Reads and strictly parses a policy file (`.noInput` when missing, `.usage` when invalid).
    static func readPolicy(_ path: String) throws -> Policy {
        let data = try readInputFile(path)
        return try attempt(path) { try Policy.parse(data, source: path) }
    }

    private static func list(_ names: [String]) -> String {
        names.isEmpty ? "(none)" : names.sorted().joined(separator: ", ")
    }
}
