import Foundation
import MAMFS
import MAMFileProvider
import MAMProtection

/// `diagnose` and `scrub`: a report to share when something is wrong, and the values it hides.
enum DiagnoseCommands {
    static let diagnose = Verb(
        "diagnose",
        usage: ["mamfs diagnose [--json] [--state DIR]"],
        summary: "Print a diagnostic report: versions (mamfs, SQLite, OpenSSL, libfuse, libcurl, libxml2, state schema), state directory checks (modes, owners, SQLite integrity_check, how the master key is kept and how many keys each account has; never key bytes), the mamfs mounts of /proc/self/mountinfo with their options, every account with a summary of its policy and its last compliance result, the allowed accounts and the last 10 audit records. Every value of the scrub list (see 'mamfs scrub') is replaced by [scrubbed].",
        options: ["--json                  print the report as one JSON object {versions, state, mounts, accounts,",
                  "                        allowedAccounts, audit}"],
        spec: ArgumentSpec(flags: ["--json"]),
        run: runDiagnose)

    static let scrub = Verb(
        "scrub",
        usage: ["mamfs scrub [VALUE...] [--clear] [--json] [--state DIR]"],
        summary: "Set the scrub list to the VALUEs (UPNs, paths, any text; matched case-insensitively), replacing it; without VALUE show it; --clear removes it. 'mamfs diagnose' and the log of every mount of the state replace every occurrence of a value with [scrubbed].",
        options: ["--clear                 remove the list",
                  "--json                  show the list as {\"scrub\": [VALUE...]}"],
        spec: ArgumentSpec(flags: ["--clear", "--json"], atLeast: 0),
        run: runScrub)

    static func runDiagnose(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        let report = try attempt(nil) { 
            try DiagnosticReport.collect(context: context, toolVersion: CommandLineTool.version,
                                         libraryVersions: RemoteLibraryVersions.all.merging(["libfuse": FuseLibraryVersion.current]) { a, _ in a })
        }
        if arguments.flag("--json") {
            Output.out(try JSON.text(report.tree))
        } else {
            var lines: [String] = []
            render(report.tree, indent: "", into: &lines)
            // Each line escaped (`Output.printable`): a path or UPN in the report cannot break it.
            Output.out(lines.map(Output.printable).joined(separator: "\n") + "\n")
        }
        return ExitCode.ok
    }

    static func runScrub(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let clear = arguments.flag("--clear")
        if clear && !arguments.positionals.isEmpty { throw UsageError("--clear takes no VALUE") }
        let context = try invocation.openContext()
        if clear || !arguments.positionals.isEmpty {
            let stored = try attempt(nil) { try context.state.setScrubValues(clear ? [] : arguments.positionals) }
            Output.line(stored.isEmpty ? "Cleared the scrub list" : "Scrubbing \(stored.count) value\(stored.count == 1 ? "" : "s")")
            return ExitCode.ok
        }
        let values = try attempt(nil) { try context.state.scrubValues() }
        if arguments.flag("--json") {
            Output.out(try JSON.text(["scrub": values]))
        } else {
            for value in values { Output.line(value) }
        }
        return ExitCode.ok
    }

    /// The report as indented `key: value` lines, keys sorted; array elements as `-` items.
    static func render(_ value: Any, indent: String, into lines: inout [String]) {
        if let object = value as? [String: Any] {
            for key in object.keys.sorted() {
                let element = object[key] ?? NSNull()
                if isScalar(element) {
                    lines.append("\(indent)\(key): \(scalarText(element))")
                } else {
                    lines.append("\(indent)\(key):")
                    render(element, indent: indent + "  ", into: &lines)
                }
            }
        } else if let array = value as? [Any] {
            if array.isEmpty { lines.append("\(indent)(none)") }
            for element in array {
                if isScalar(element) {
                    lines.append("\(indent)- \(scalarText(element))")
                } else {
                    var nested: [String] = []
                    render(element, indent: indent + "  ", into: &nested)
                    if let first = nested.first {
                        lines.append(indent + "- " + first.dropFirst(indent.count + 2))
                        lines += nested.dropFirst()
                    }
                }
            }
        } else {
            lines.append(indent + scalarText(value))
        }
    }

    static func isScalar(_ value: Any) -> Bool { !(value is [String: Any]) && !(value is [Any]) }

    static func scalarText(_ value: Any) -> String {
        if value is NSNull { return "-" }
        if let number = value as? NSNumber, type(of: number) == type(of: NSNumber(value: true)) {
            return number.boolValue ? "yes" : "no"
        }
        if let flag = value as? Bool { return flag ? "yes" : "no" }
        return "\(value)"
    }
}
