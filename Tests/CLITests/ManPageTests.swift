import Foundation
import Testing
import MAMProtection
import MAMTestSupport

@Suite("Install: the man pages render cleanly and document every verb, option, exit code, policy key and helper option")
struct ManPageTests {
    static let pages = ["/usr/share/man/man1/mamfs.1", "/usr/share/man/man5/mamfs-policy.5",
                        "/usr/share/man/man8/mount.fuse.mamfs.8"]

    /// A rendered man page: its text, and the text of each section (.SH) and subsection (.SS).
    struct RenderedPage {
        let text: String
        var sections: [String: String] = [:]
        var subsections: [String: String] = [:]

        /// Renders `page` with groff as plain ASCII, one paragraph per line (line length 1000,
        /// no hyphenation), so every word and option appears whole.
        init(_ page: String) throws {
            let result = try runProcess("/usr/bin/groff", ["-t", "-man", "-Tascii", "-rLL=1000n", "-rHY=0", "-P-cbou", page],
                                        environment: testEnvironment())
            guard result.status == 0 else { throw SandboxError.failed("groff \(page)", result) }
            text = result.out
            var section = "", subsection = ""
            for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
                if let first = line.first, first != " " {
                    section = line
                    subsection = ""
                } else if line.hasPrefix("   "), !line.hasPrefix("    ") {
                    subsection = line.trimmingCharacters(in: .whitespaces)
                } else {
                    sections[section, default: ""] += line + "\n"
                    if !subsection.isEmpty { subsections[subsection, default: ""] += line + "\n" }
                }
            }
        }

        /// True when `word` occurs in `text` as a whole word (not inside a longer option or
        /// name); a word ending in `=` (`account=`) may be followed by its value.
        static func mentions(_ text: String, _ word: String) -> Bool {
            let escaped = NSRegularExpression.escapedPattern(for: word)
            let end = word.hasSuffix("=") ? "" : "($|[^A-Za-z0-9_-])"
            return text.range(of: "(^|[^A-Za-z0-9_-])" + escaped + end, options: .regularExpression) != nil
        }
    }

    /// The verbs `mamfs --help` lists ("init", "policy show", ...).
    static func listedVerbs() throws -> [String] {
        let help = try runProcess(MamfsBinary.path, ["--help"], environment: testEnvironment())
        guard help.status == 0 else { throw SandboxError.failed("mamfs --help", help) }
        var verbs: [String] = []
        var inVerbs = false
        for line in help.out.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("verbs:") { inVerbs = true; continue }
            guard inVerbs else { continue }
            guard line.hasPrefix("  mamfs ") else { break }
            let words = line.split(separator: " ").dropFirst().prefix { $0.allSatisfy { $0.isLowercase || $0 == "-" } && !$0.hasPrefix("-") }
            verbs.append(words.joined(separator: " "))
        }
        return verbs
    }

    /// The options `mamfs VERB --help` lists ("--account", "-R", both "-v" and "--verbose" of
    /// "-v, --verbose", ...).
    static func options(of verb: String) throws -> [String] {
        let help = try runProcess(MamfsBinary.path, verb.split(separator: " ").map(String.init) + ["--help"],
                                  environment: testEnvironment())
        guard help.status == 0 else { throw SandboxError.failed("mamfs \(verb) --help", help) }
        return help.out.split(separator: "\n").filter { $0.hasPrefix("  -") }.flatMap { line -> [String] in
            let names = line.dropFirst(2).components(separatedBy: "  ")[0].components(separatedBy: ", ")
            return names.compactMap { $0.split(separator: " ").first.map(String.init) }.filter { $0.hasPrefix("-") }
        }
    }

    @Test("every page renders without a warning from man or groff", arguments: pages)
    func rendersWithoutWarnings(page: String) throws {
        let tree = try InstalledTree(prefix: "/usr")
        let file = tree.path(page)
        let man = try runProcess("/usr/bin/man", ["--warnings", "-l", file], environment: testEnvironment(["MANWIDTH": "80"]))
        #expect(man.status == 0)
        #expect(man.err == "", "man --warnings: \(man.err)")
        #expect(man.out.contains("NAME"), "man renders the page")
        let groff = try runProcess("/usr/bin/groff", ["-ww", "-z", "-t", "-man", file], environment: testEnvironment())
        #expect(groff.status == 0)
        #expect(groff.err == "", "groff -ww: \(groff.err)")
        let name = ((page as NSString).lastPathComponent as NSString).deletingPathExtension
        #expect(try RenderedPage(file).sections["NAME"]?.contains(name + " - ") == true, "NAME names \(name)")
    }

    @Test("mamfs(1) has a subsection for every verb mamfs --help lists, naming each of the verb's options")
    func mamfsPageDocumentsEveryVerb() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let page = try RenderedPage(tree.path("/usr/share/man/man1/mamfs.1"))
        let verbs = try Self.listedVerbs()
        #expect(verbs.count >= 21, "verbs found in mamfs --help: \(verbs)")
        let global = page.sections["GLOBAL OPTIONS"] ?? ""
        for verb in verbs {
            let section = page.subsections["mamfs \(verb)"]
            #expect(section != nil, "no subsection 'mamfs \(verb)' in mamfs(1)")
            guard let section else { continue }
            #expect(section.contains("mamfs \(verb)"), "the subsection of \(verb) shows its synopsis")
            for option in try Self.options(of: verb) {
                #expect(RenderedPage.mentions(section, option) || RenderedPage.mentions(global, option),
                        "mamfs(1) does not document \(option) of mamfs \(verb)")
            }
        }
        // The options `mamfs --help` lists itself (if any), and those every mamfs takes.
        for option in Set(try Self.options(of: "") + ["--state", "--help", "--version"]) {
            #expect(RenderedPage.mentions(global, option), "GLOBAL OPTIONS lacks \(option)")
        }
    }

    @Test("mamfs(1) lists every exit code, the environment variables and the state files")
    func mamfsPageDocumentsCodesEnvironmentFiles() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let page = try RenderedPage(tree.path("/usr/share/man/man1/mamfs.1"))
        let tags = Set((page.sections["EXIT STATUS"] ?? "").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        for code in ExitCode.allCases {
            #expect(tags.contains(code.description), "EXIT STATUS lacks \(code.description) (\(code))")
        }
        for variable in ["MAMFS_STATE", "MAMFS_PASSPHRASE_FILE", "XDG_DATA_HOME", "HOME"] {
            #expect(RenderedPage.mentions(page.sections["ENVIRONMENT"] ?? "", variable), "ENVIRONMENT lacks \(variable)")
        }
        for file in [StateDirectory.databaseFileName, StateDirectory.masterKeyFileName, "audit.log", ".mamfs-provider"] {
            #expect((page.sections["FILES"] ?? "").contains(file), "FILES lacks \(file)")
        }
    }

    @Test("mamfs-policy(5) documents every key and location name of docs/POLICY.md")
    func policyPageDocumentsEveryKey() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let page = try RenderedPage(tree.path("/usr/share/man/man5/mamfs-policy.5"))
        let policy = try String(contentsOfFile: InstalledTree.repository + "/docs/POLICY.md", encoding: .utf8)
        let lines = policy.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let schema = lines.drop { !$0.hasPrefix("| Key | Type |") }.dropFirst(2).prefix { $0.hasPrefix("| `") }
        let keys = schema.compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
        #expect(keys.count >= 10, "keys found in docs/POLICY.md: \(keys)")
        let keyTags = (page.sections["KEYS"] ?? "").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        for key in keys {
            #expect(keyTags.contains { $0.hasPrefix(key + " (") }, "KEYS lacks \(key)")
        }
        for prefix in ["Save locations:", "Open locations:"] {
            let line = lines.drop { !$0.hasPrefix(prefix) }.prefix { !$0.isEmpty }.joined(separator: " ")
            let names = line.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
            #expect(names.count >= 10, "\(prefix) \(names)")
            let documented = (page.sections["LOCATIONS"] ?? "").split(separator: "\n")
                .first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(prefix) }.map(String.init) ?? ""
            for name in names {
                #expect(RenderedPage.mentions(documented, name), "LOCATIONS: \(prefix) lacks \(name)")
            }
        }
    }

    @Test("mount.fuse.mamfs(8) documents every option the installed helper handles itself")
    func helperPageDocumentsEveryOption() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let page = try RenderedPage(tree.path("/usr/share/man/man8/mount.fuse.mamfs.8"))
        let options = page.sections["OPTIONS"] ?? ""
        let helper = try tree.text("/sbin/mount.fuse.mamfs")
        // The case arms of the option loop: `account=*)`, `""|defaults|auto|...|x-*|comment=*)`.
        var handled: [String] = []
        for line in helper.split(separator: "\n") {
            let arm = line.trimmingCharacters(in: .whitespaces)
            guard let close = arm.firstIndex(of: ")"), arm.contains("=*") || arm.contains("defaults|") else { continue }
            handled += arm[..<close].split(separator: "|").map { $0.replacingOccurrences(of: "*", with: "") }
                .filter { !$0.isEmpty && $0 != "\"\"" }
        }
        #expect(handled.contains("account=") && handled.contains("nofail"), "options found in the helper: \(handled)")
        for option in handled {
            #expect(RenderedPage.mentions(options, option), "OPTIONS lacks \(option)")
        }
    }
}
