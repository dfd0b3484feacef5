/// The result of parsing one verb's arguments.
struct ParsedArguments: Equatable {
    var flags: Set<String> = []
    var options: [String: [String]] = [:]
    var positionals: [String] = []

    /// True when `name` was given.
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value of a single-valued option (the last one given), or nil.
    func value(_ name: String) -> String? { options[name]?.last }

    /// Every value of a repeatable option, in order.
    func values(_ name: String) -> [String] { options[name] ?? [] }

    /// True when `--help` was given.
    var wantsHelp: Bool { flag(ArgumentSpec.helpFlag) }

    /// True when `-v` or `--verbose` was given.
    var verbose: Bool { flag(ArgumentSpec.verboseFlag) || flag(ArgumentSpec.verboseShortFlag) }

    /// The `--state DIR` value, if given.
    var state: String? { value(ArgumentSpec.stateOption) }
}
