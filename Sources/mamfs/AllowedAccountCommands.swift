import Foundation
import MAMProtection

/// `accounts allow` and `accounts allowed`: the state-wide allowed-accounts list.
enum AllowedAccountCommands {
    static let allow = Verb(
        "accounts allow",
        usage: ["mamfs accounts allow ACCOUNT... [--state DIR]",
                "mamfs accounts allow --clear [--state DIR]"],
        summary: "Set the allowed-accounts list to the ACCOUNTs (accountIds, UPNs or OID.TID; UPNs compare case-insensitively), replacing it. While it is set, enroll, protect and mount --account refuse every other account (\(ExitCode.noPerm)) and write the refusal to the audit log; accounts already enrolled stay enrolled. --clear removes the list: every account is allowed again.",
        options: ["--clear                 remove the list (every account allowed)"],
        spec: ArgumentSpec(flags: ["--clear"], atLeast: 0),
        run: runAllow)

    static let allowed = Verb(
        "accounts allowed",
        usage: ["mamfs accounts allowed [--json] [--state DIR]"],
        summary: "Show the allowed-accounts list, one name a line (lowercase, as stored), or 'Every account is allowed.' when it is not set.",
        options: ["--json                  print {\"allowedAccounts\": [NAME...]} ([] when not set)"],
        spec: ArgumentSpec(flags: ["--json"]),
        run: runAllowed)

    /// The `mamfs accounts --help` text: the verb and its sub-verbs.
    static var groupHelp: String {
        AccountCommands.accounts.helpText + """

        sub-verbs:
          mamfs accounts allow ACCOUNT...   set the allowed-accounts list ('mamfs accounts allow --help')
          mamfs accounts allow --clear      remove it
          mamfs accounts allowed [--json]   show it

        """
    }

    static func runAllow(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let clear = arguments.flag("--clear")
        if clear && !arguments.positionals.isEmpty { throw UsageError("--clear takes no ACCOUNT") }
        if !clear && arguments.positionals.isEmpty { throw UsageError("missing ACCOUNT (or --clear)") }
        let context = try invocation.openContext()
        let stored = try attempt(nil) { try context.state.setAllowedAccounts(clear ? [] : arguments.positionals) }
        CommandAudit.record(context, action: "allow-accounts", path: stored.joined(separator: ","), owner: "")
        Output.line(stored.isEmpty ? "Cleared the allowed accounts: every account is allowed"
                                   : "Allowed accounts: \(stored.joined(separator: ", "))")
        return ExitCode.ok
    }

    static func runAllowed(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        let names = try attempt(nil) { try context.state.allowedAccounts() }
        if arguments.flag("--json") {
            Output.out(try JSON.text(["allowedAccounts": names]))
        } else if names.isEmpty {
            Output.line("Every account is allowed.")
        } else {
            for name in names { Output.line(name) }
        }
        return ExitCode.ok
    }
}
