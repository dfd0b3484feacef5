import Foundation
import MAMProtection

/// The `mamfs` command line: finds the verb, parses its arguments, runs it and turns errors into
/// one stderr line and an `ExitCode`.
enum CommandLineTool {
    static let version = "0.1.0"

    /// Every verb, in the order `mamfs --help` lists them.
    static let verbs: [Verb] = [
        InitCommand.verb,
        AccountCommands.enroll,
        AccountCommands.unenroll,
        AccountCommands.accounts,
        AllowedAccountCommands.allow,
        AllowedAccountCommands.allowed,
        PolicyCommands.show,
        PolicyCommands.set,
        ConfigCommands.get,
        ComplianceCommands.check,
        ComplianceCommands.remediate,
        ComplianceCommands.status,
        ProtectCommands.protect,
        ProtectCommands.info,
        ProtectionCheckCommands.verifyProtect,
        ProtectionCheckCommands.canReceive,
        ProtectCommands.encrypt,
        ProtectCommands.decrypt,
        DataCommands.protectData,
        DataCommands.unprotectData,
        AccountCommands.wipe,
        MountVerbs.mount,
        MountVerbs.unmount,
        SessionLockCommands.lock,
        SessionLockCommands.unlock,
        AuditCommands.show,
        AuditCommands.verify,
        DiagnoseCommands.diagnose,
        DiagnoseCommands.scrub,
        EventCommands.events,
    ] + ProviderVerbs.all

    /// Verbs with sub-verbs (`mamfs policy show`): the group name, its sub-verbs and the text
    /// `mamfs GROUP --help` prints.
    static var groups: [(name: String, subVerbs: [String], help: String)] {
        [("policy", ["show", "set"], PolicyCommands.groupHelp),
         ("accounts", ["allow", "allowed"], AllowedAccountCommands.groupHelp),
         ("config", ["get"], ConfigCommands.groupHelp),
         ("compliance", ["check", "remediate", "status"], ComplianceCommands.groupHelp),
         ("provider", ["sync", "status", "evict", "import", "reattach"], ProviderVerbs.groupHelp),
         ("audit", ["verify"], AuditCommands.show.helpText)]
    }

    static var helpText: String {
        var lines = [
            "usage: mamfs [--state DIR] [-v] VERB [ARGUMENTS]",
            "",
            "mamfs protects files the way mobile application management does: every file carries its",
            "owner's accountId, files of the managed account are encrypted (AES-256-GCM), and a",
            "selective wipe removes what the account owns.",
            "",
            "verbs:",
        ]
        for verb in verbs {
            lines.append("  " + verb.usage[0])
        }
        lines += [
            "",
            "global options (before or after the verb):",
            "  --state DIR             the state directory (default: $MAMFS_STATE, else $XDG_DATA_HOME/mamfs,",
            "                          else ~/.local/share/mamfs)",
        ] + Verb.verboseHelp + [
            "  --help                  this overview; 'mamfs VERB --help' or 'mamfs --help VERB' describes a verb",
            "  --version               print the version",
            "",
            "ACCOUNT is an accountId (GUID) or a UPN, in any case.",
            "",
            "exit codes: \(ExitCode.ok) ok, \(ExitCode.usage) usage, \(ExitCode.dataErr) corrupt or tampered data, \(ExitCode.noInput) missing input, \(ExitCode.unavailable) no session bus",
            "(events) or no mount daemon answering (lock, unlock), \(ExitCode.software) internal error, \(ExitCode.cantCreate) cannot create output, \(ExitCode.ioErr) I/O or sync item error, \(ExitCode.tempFail) remote unreachable",
            "or daemon still running after unmount (retry later), \(ExitCode.noPerm) denied by policy or key unavailable;",
            "compliance verbs: \(ExitCode.notCompliant) NotCompliant, \(ExitCode.networkFailure) NetworkFailure, \(ExitCode.serviceFailure) ServiceFailure, \(ExitCode.userCancelled) UserCancelled,",
            "\(ExitCode.interactionRequired) InteractionRequired.",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// Runs the command line `arguments` (without the program name); returns the exit code.
    /// Options before the verb are `GlobalOptions`. A command whose output could not all be
    /// written to stdout fails with EX_IOERR (74) and says why on stderr (not for EPIPE: the
    /// reader chose to stop), unless it failed already with its own code.
    static func run(_ arguments: [String], environment: [String: String]) -> ExitCode {
        Output.resetStdoutFailure()
        let code = runCommand(arguments, environment: environment)
        guard code == .ok, let failure = Output.stdoutFailure else { return code }
        if failure != EPIPE { Output.error("mamfs: cannot write to stdout: \(String(cString: strerror(failure)))") }
        return .ioErr
    }

    private static func runCommand(_ arguments: [String], environment: [String: String]) -> ExitCode {
        let globals: GlobalOptions
        let words: [String]
        do {
            (globals, words) = try GlobalOptions.parse(arguments)
        } catch {
            Output.error("mamfs: \(error.message)")
            Output.error("Try 'mamfs --help'.")
            return ExitCode.usage
        }
        if globals.version {
            Output.line("mamfs \(version)")
            return ExitCode.ok
        }
        guard let first = words.first else {
            if globals.help {
                Output.out(helpText)
                return ExitCode.ok
            }
            Output.error("mamfs: missing verb")
            Output.error("Try 'mamfs --help'.")
            return ExitCode.usage
        }
        if first == "help" {
            Output.out(helpText)
            return ExitCode.ok
        }

        // The global options go to the verb's own parser, after its arguments.
        var rest = Array(words.dropFirst()) + globals.verbArguments
        var name = first
        // A group that is also a verb (`mamfs audit [OPTIONS]`) runs that verb unless a sub-verb follows.
        let runsGroupVerb = verbs.contains { $0.name == first }
            && !(rest.first.map { sub in groups.contains { $0.name == first && $0.subVerbs.contains(sub) } } ?? false)
        if !runsGroupVerb, let group = groups.first(where: { $0.name == first }) {
            let expected = group.subVerbs.map { "'\($0)'" }
            let listed = expected.count <= 2 ? expected.joined(separator: " or ")
                : expected.dropLast().joined(separator: ", ") + " or " + (expected.last ?? "")
            guard let sub = rest.first else {
                Output.error("mamfs: \(first): missing \(listed)")
                Output.error("Try 'mamfs \(first) --help'.")
                return ExitCode.usage
            }
            if sub == "--help" || sub == "-h" {
                Output.out(group.help)
                return ExitCode.ok
            }
            guard group.subVerbs.contains(sub) else {
                Output.error("mamfs: \(first): unknown sub-command '\(InputQuote.short(sub))' (expected \(listed))")
                Output.error("Try 'mamfs \(first) --help'.")
                return ExitCode.usage
            }
            name = "\(first) \(sub)"
            rest.removeFirst()
        }

        guard let verb = verbs.first(where: { $0.name == name }) else {
            if first.hasPrefix("-") {
                Output.error("mamfs: unknown option '\(InputQuote.short(first))'")
            } else {
                Output.error("mamfs: unknown verb '\(InputQuote.short(first))'")
            }
            Output.error("Try 'mamfs --help'.")
            return ExitCode.usage
        }
        return run(verb, rest, environment: environment)
    }

    static func run(_ verb: Verb, _ arguments: [String], environment: [String: String]) -> ExitCode {
        do {
            let parsed = try parseArguments(arguments, spec: verb.spec)
            if parsed.wantsHelp {
                Output.out(verb.helpText)
                return ExitCode.ok
            }
            if let state = parsed.state, state.isEmpty {
                throw UsageError("--state needs a directory")
            }
            var invocation = Invocation(verb: verb.name, environment: environment, explicitState: parsed.state)
            invocation.verbose = parsed.verbose
            return try verb.run(parsed, invocation)
        } catch let error as UsageError {
            Output.error("mamfs: \(verb.name): \(error.message)")
            Output.error("Try 'mamfs \(verb.name) --help'.")
            return ExitCode.usage
        } catch let failure as CommandFailure {
            Output.error(failure.line(verb: verb.name))
            return failure.exitCode
        } catch {
            let failure = CommandFailure(subject: nil, error: error)
            Output.error(failure.line(verb: verb.name))
            return failure.exitCode
        }
    }
}
