import Foundation
import MAMProtection

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
