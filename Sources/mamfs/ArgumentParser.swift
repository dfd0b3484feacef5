import Foundation
import MAMProtection

/// A command line the user got wrong: unknown option, missing value, wrong number of
/// arguments. The CLI prints the message and a hint and exits with `ExitCode.usage`.
struct UsageError: Error, Equatable {
    let message: String
    init(_ message: String) { self.message = message }
}

/// What one verb accepts: boolean flags, options that take a value (some of them repeatable)
/// and how many positional arguments. `--state DIR` and `--help` are added to every verb.
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

    init(flags: Set<String> = [], options: Set<String> = [], repeatable: Set<String> = [],
         positionals: ClosedRange<Int> = 0...0) {
        self.flags = flags.union([Self.helpFlag])
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

    /// The `--state DIR` value, if given.
    var state: String? { value(ArgumentSpec.stateOption) }
}

/// Parses the arguments of one verb (everything after the verb name).
///
/// Accepted forms: `--flag`, `--opt VALUE`, `--opt=VALUE`, `-o VALUE`, `-oVALUE` for
/// single-letter options, `--` (everything after it is positional), and a lone `-` as a
/// positional. Options may appear before, between or after positionals. An option value may be
/// empty (`--account ''`) and may start with `-` (it is taken as the value, not an option).
///
/// - Throws: `UsageError` for an unknown option, a missing value, a value given to a flag, a
///   non-repeatable option given twice, or too few or too many positional arguments. When
///   `--help` is present, positional counts are not checked (so `mamfs VERB --help` always works).
func parseArguments(_ arguments: [String], spec: ArgumentSpec) throws -> ParsedArguments {
    var result = ParsedArguments()
    var index = 0
    var onlyPositionals = false

    func store(_ name: String, _ value: String) throws {
        if result.options[name] != nil && !spec.repeatable.contains(name) {
            throw UsageError("option '\(InputQuote.short(name))' given more than once")
        }
        result.options[name, default: []].append(value)
    }

    while index < arguments.count {
        let argument = arguments[index]
        index += 1
        if onlyPositionals || argument == "-" || !argument.hasPrefix("-") {
            result.positionals.append(argument)
            continue
        }
        if argument == "--" {
            onlyPositionals = true
            continue
        }
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            let name = String(argument[..<equals])
            let value = String(argument[argument.index(after: equals)...])
            if spec.options.contains(name) {
                try store(name, value)
            } else if spec.flags.contains(name) {
                throw UsageError("option '\(InputQuote.short(name))' takes no value")
            } else {
                throw UsageError("unknown option '\(InputQuote.short(name))'")
            }
            continue
        }
        if spec.flags.contains(argument) {
            result.flags.insert(argument)
            continue
        }
        if spec.options.contains(argument) {
            guard index < arguments.count else {
                throw UsageError("option '\(InputQuote.short(argument))' needs a value")
            }
            try store(argument, arguments[index])
            index += 1
            continue
        }
        // `-oOUT`: a single-letter option with its value attached.
        if !argument.hasPrefix("--"), argument.count > 2 {
            let name = String(argument.prefix(2))
            if spec.options.contains(name) {
                try store(name, String(argument.dropFirst(2)))
                continue
            }
        }
        throw UsageError("unknown option '\(InputQuote.short(argument))'")
    }

    if result.wantsHelp { return result }
    if result.positionals.count < spec.minPositionals {
        throw UsageError(spec.minPositionals == 1 && result.positionals.isEmpty
            ? "missing argument"
            : "expected at least \(spec.minPositionals) argument\(spec.minPositionals == 1 ? "" : "s"), got \(result.positionals.count)")
    }
    if let max = spec.maxPositionals, result.positionals.count > max {
        let extra = result.positionals[max]
        throw UsageError(max == 0 ? "unexpected argument '\(InputQuote.short(extra))'" : "unexpected extra argument '\(InputQuote.short(extra))'")
    }
    return result
}
