import Foundation
import MAMProtection

/// `config get`: the app configuration (`appConfig`) of a managed account's policy.
enum ConfigCommands {
    static let get = Verb(
        "config get",
        usage: ["mamfs config get ACCOUNT [NAME] [--json] [--state DIR]"],
        summary: "Print the app configuration of the managed account ACCOUNT (the policy's appConfig): every NAME=VALUE pair, one a line, sorted by name, or the value of NAME alone. A NAME the policy does not set exits \(ExitCode.noInput); an account that is not enrolled \(ExitCode.noPerm).",
        options: ["--json                  print a JSON object of name -> value (only NAME's pair with NAME)"],
        spec: ArgumentSpec(flags: ["--json"], positionals: 1...2),
        run: runGet)

    /// The `mamfs config --help` text.
    static var groupHelp: String { Self.get.helpText }

    static func runGet(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let name = arguments.positionals.count > 1 ? arguments.positionals[1] : nil
        let context = try invocation.openContext()
        let policy = try attempt(account) { try context.enrollment.policy(of: account) }
        var pairs = policy.appConfig
        if let name {
            guard let value = policy.appConfigValue(name) else {
                throw CommandFailure(subject: account, message: "no app configuration setting '\(InputQuote.short(name))'",
                                     exitCode: .noInput)
            }
            pairs = [name: value]
            if !arguments.flag("--json") {
                Output.line(value)
                return ExitCode.ok
            }
        }
        if arguments.flag("--json") {
            Output.out(try JSON.text(pairs))
        } else {
            for key in pairs.keys.sorted() { Output.line("\(key)=\(pairs[key] ?? "")") }
        }
        return ExitCode.ok
    }
}
