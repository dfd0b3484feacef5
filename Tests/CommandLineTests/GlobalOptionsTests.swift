import Testing
@testable import mamfs

@Suite("GlobalOptions")
struct GlobalOptionsTests {
    @Test("leading options are split off up to the verb; what follows the verb is left alone")
    func splits() throws {
        let (options, rest) = try GlobalOptions.parse(["--state", "/s", "-v", "mount", "b", "m", "--state", "/t", "-f"])
        #expect(options == GlobalOptions(state: "/s", verbose: true, help: false, version: false))
        #expect(rest == ["mount", "b", "m", "--state", "/t", "-f"])
        #expect(options.verbArguments == ["--state", "/s", "--verbose"])
        let (attached, words) = try GlobalOptions.parse(["--state=", "--help", "--version"])
        #expect(attached == GlobalOptions(state: "", verbose: false, help: true, version: true))
        #expect(words.isEmpty)
        #expect(try GlobalOptions.parse(["-", "x"]).rest == ["-", "x"])
        #expect(try GlobalOptions.parse(["-h", "info"]).0.verbArguments == ["--help"])
    }

    @Test("unknown options, a missing --state value, --state twice and a value for a flag are usage errors")
    func errors() {
        func message(_ arguments: [String]) -> String? {
            do {
                _ = try GlobalOptions.parse(arguments)
                return nil
            } catch {
                return error.message
            }
        }
        #expect(message(["--bogus", "info"]) == "unknown option '--bogus'")
        #expect(message(["--state"]) == "option '--state' needs a value")
        #expect(message(["--state", "a", "--state=b", "info"]) == "option '--state' given more than once")
        #expect(message(["--version=2"]) == "option '--version' takes no value")
    }

    @Test("a mount daemon is started (and inherited descriptors closed) after global options too, never with -f or --help")
    func startsDaemon() {
        #expect(InheritedDescriptors.startsDaemon(["mount", "b", "m"]))
        #expect(InheritedDescriptors.startsDaemon(["--state", "/s", "-v", "mount", "b", "m"]))
        #expect(!InheritedDescriptors.startsDaemon(["-v", "mount", "b", "m", "-f"]))
        #expect(!InheritedDescriptors.startsDaemon(["--help", "mount"]))
        #expect(!InheritedDescriptors.startsDaemon(["--version", "mount", "b", "m"]))
        #expect(!InheritedDescriptors.startsDaemon(["--state", "mount", "b", "m"]), "'mount' is the state directory here")
        #expect(!InheritedDescriptors.startsDaemon(["--bogus", "mount", "b", "m"]))
    }
}
