import MAMProtection

/// The options `mamfs` takes before the verb, as git and systemctl do:
/// `mamfs --state DIR -v mount ...`, `mamfs --help`, `mamfs --version`.
///
/// `--state DIR` (or `--state=DIR`) and `-v`/`--verbose` mean the same as after the verb: they
/// are handed to the verb's own parser (`verbArguments`), which also refuses `--state` given on
/// both sides. `--help` (`-h`) before a verb asks for that verb's help, before nothing for the
/// overview; `--version` wins over everything else.
struct GlobalOptions: Equatable {
    var state: String?
    var verbose = false
    var help = false
    var version = false

    /// The options that take a value before the verb.
    static let valued: Set<String> = [ArgumentSpec.stateOption]
    /// The flags accepted before the verb.
    static let flags: Set<String> = ["-v", "--verbose", "-h", "--help", "--version"]

    /// Splits the leading options off `arguments` (everything up to the first word that does
    /// not start with `-`, which is the verb).
    /// - Returns: the options and the rest (the verb and its arguments; empty when none).
    /// - Throws: `UsageError` for an unknown option, `--state` without a value, a value given
    ///   to a flag (`--verbose=yes`), or `--state` given twice before the verb.
    static func parse(_ arguments: [String]) throws(UsageError) -> (GlobalOptions, rest: [String]) {
        var options = GlobalOptions()
        var index = 0
        while index < arguments.count, arguments[index].hasPrefix("-"), arguments[index] != "-" {
            let argument = arguments[index]
            index += 1
            var name = argument
            var attached: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                attached = String(argument[argument.index(after: equals)...])
            }
            if valued.contains(name) {
                let value: String
                if let attached {
                    value = attached
                } else {
                    guard index < arguments.count else { throw UsageError("option '\(name)' needs a value") }
                    value = arguments[index]
                    index += 1
                }
                guard options.state == nil else { throw UsageError("option '\(name)' given more than once") }
                options.state = value
                continue
            }
            guard flags.contains(name) else { throw UsageError("unknown option '\(InputQuote.short(name))'") }
            guard attached == nil else { throw UsageError("option '\(name)' takes no value") }
            switch name {
            case "-v", "--verbose": options.verbose = true
            case "-h", "--help": options.help = true
            default: options.version = true
            }
        }
        return (options, Array(arguments[index...]))
    }

    /// What the verb's parser gets in addition to the verb's own arguments.
    var verbArguments: [String] {
        (state.map { [ArgumentSpec.stateOption, $0] } ?? []) + (verbose ? [ArgumentSpec.verboseFlag] : [])
            + (help ? [ArgumentSpec.helpFlag] : [])
    }
}
