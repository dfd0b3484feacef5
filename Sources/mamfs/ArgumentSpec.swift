/// What one verb accepts: boolean flags, options that take a value (some of them repeatable)
/// and how many positional arguments. `--state DIR`, `--help` and `-v`/`--verbose` are added to
/// every verb.
struct ArgumentSpec: Sendable {
    /// Flags without a value, e.g. `--json`, `-R`.
    var flags: Set<String> = []
    /// Options that take a value (`--account A`, `--account=A`, `-o OUT`).
    var options: Set<String> = []
    /// Options of `options` that may be given more than once (`--root DIR`...).
    var repeatable: Set<String> = []
    /// Fewest positional arguments.
    var minPositionals = 0
    /// Most positional arguments; nil for no limit.
    var maxPositionals: Int? = 0

    static let stateOption = "--state"
    static let helpFlag = "--help"
    static let verboseFlag = "--verbose"
    static let verboseShortFlag = "-v"

    init(flags: Set<String> = [], options: Set<String> = [], repeatable: Set<String> = [],
         positionals: ClosedRange<Int> = 0...0) {
        self.flags = flags.union([Self.helpFlag, Self.verboseFlag, Self.verboseShortFlag])
        self.options = options.union(repeatable).union([Self.stateOption])
        self.repeatable = repeatable
        self.minPositionals = positionals.lowerBound
        self.maxPositionals = positionals.upperBound
    }

    /// A spec with at least `minPositionals` and any number of positional arguments.
    init(flags: Set<String> = [], options: Set<String> = [], repeatable: Set<String> = [],
         atLeast minPositionals: Int) {
        self.init(flags: flags, options: options, repeatable: repeatable, positionals: 0...0)
        self.minPositionals = minPositionals
        self.maxPositionals = nil
    }
}
