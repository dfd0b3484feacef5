import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// The session-bus signals of the CLI verbs, `mamfs events`, and the `--json` enrollment statuses,
/// against a real dbus-daemon started by each test.
@Suite("Notifications: CLI signals on the session bus, mamfs events, --json enrollment statuses")
struct NotificationTests {
    static let account = MamfsCLI.managedAccount
    static let other = MamfsCLI.otherAccount

    /// Runs mamfs with `environment` added to the test environment.
    static func mamfs(_ arguments: [String], state: String, _ environment: [String: String]) throws -> ProcessResult {
        try runProcess(MamfsBinary.path, arguments + ["--state", state], environment: testEnvironment(environment), timeout: 60)
    }

    /// A temp directory with an initialised state and the encrypting policy file; `environment` for init.
    static func freshState(_ prefix: String, _ environment: [String: String] = [:]) throws -> (dir: TempDirectory, state: String, policy: String) {
        let dir = try TempDirectory(prefix: prefix)
        let state = dir.file("state")
        let policy = dir.file("policy.json")
        try Data(MamfsCLI.encryptingPolicy.utf8).write(to: URL(fileURLWithPath: policy))
        let initialised = try mamfs(["init"], state: state, environment.isEmpty ? SessionBus.noBusEnvironment(runtimeDirectory: dir.path) : environment)
        guard initialised.status == 0 else { throw TestSupportError("mamfs init: \(initialised.err)") }
        return (dir, state, policy)
    }

    static func jsonLines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw TestSupportError("not a JSON object: \(line)")
            }
            return object
        }
    }

    /// `mamfs events ARGS` on `bus`, returned once it is subscribed.
    static func listen(_ bus: SessionBus, _ arguments: [String]) throws -> BackgroundProcess {
        let events = try BackgroundProcess(MamfsBinary.path, ["events"] + arguments, environment: testEnvironment(bus.environment))
        guard events.wait(until: { $0.err.contains("listening for org.mamfs.Mamfs1 signals") }) else {
            throw TestSupportError("mamfs events did not subscribe: \(events.err)")
        }
        return events
    }

    /// `dbus-monitor` of the interface's signals, returned once it became a monitor.
    static func monitor(_ bus: SessionBus) throws -> BackgroundProcess {
        let monitor = try BackgroundProcess(SessionBus.monitor, ["--address", bus.address, "type='signal',interface='org.mamfs.Mamfs1'"],
                                            environment: testEnvironment())
        guard monitor.wait(until: { $0.out.contains("NameLost") }) else {
            throw TestSupportError("dbus-monitor did not start: \(monitor.out) \(monitor.err)")
        }
        return monitor
    }

    @Test("enroll, policy set, a refused enroll, wipe and unenroll each reach mamfs events --json and dbus-monitor with their fields")
    func verbSignalsReachListeners() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let (dir, state, policy) = try Self.freshState("mamfs-notify")
        let events = try Self.listen(bus, ["--json", "--count", "5"])
        defer { events.stop() }
        let monitor = try Self.monitor(bus)
        defer { monitor.stop() }
        let env = bus.environment
        #expect(try Self.mamfs(["enroll", Self.account, "--upn", "Worker@Contoso.com", "--policy", policy], state: state, env).status == 0)
        #expect(try Self.mamfs(["policy", "set", Self.account, policy], state: state, env).status == 0)
        #expect(try Self.mamfs(["enroll", Self.other, "--policy", policy], state: state, env).status == 64)
        let file = dir.file("work.txt")
        try Data("work".utf8).write(to: URL(fileURLWithPath: file))
        #expect(try Self.mamfs(["encrypt", file, "--account", Self.account], state: state, env).status == 0)
        #expect(try Self.mamfs(["wipe", Self.account, "--root", dir.path], state: state, env).status == 0)
        #expect(try Self.mamfs(["unenroll", Self.account], state: state, env).status == 0)
        #expect(events.waitForExit(timeout: 20) == 0, "mamfs events: \(events.err)")
        let lines = try Self.jsonLines(events.out)
        #expect(lines.map { $0["signal"] as? String } == ["Enrolled", "PolicyChanged", "Enrolled", "Wiped", "Unenrolled"], "\(events.out)")
        #expect(lines.map { $0["statusCode"] as? Int } == [100, 101, 227, 102, 104])
        #expect(lines.map { $0["status"] as? String } == ["NewPoliciesReceived", "PoliciesHaveNotChanged", "SingleManagedAccountMode",
                                                           "WipeReceived", "UnenrollmentSuccess"])
        #expect(lines.map { $0["accountId"] as? String } == [Self.account, Self.account, Self.other, Self.account, Self.account])
        #expect(lines.map { $0["upn"] as? String } == ["worker@contoso.com", "worker@contoso.com", "", "worker@contoso.com", "worker@contoso.com"])
        #expect(lines.map { ($0["error"] as? String)?.isEmpty } == [true, true, false, true, true])
        if lines.count == 5 {
            #expect((lines[2]["error"] as? String)?.contains("one managed account at a time") == true)
            #expect(lines[3]["removedFiles"] as? Int == 1 && lines[3]["keysDestroyed"] as? Int == 1, "\(lines[3])")
            #expect(Set(lines[0].keys) == ["signal", "sender", "accountId", "upn", "status", "statusCode", "error"])
        }
        // The same signals as a plain D-Bus receiver sees them.
        #expect(monitor.wait { $0.out.components(separatedBy: "interface=org.mamfs.Mamfs1; member=").count == 6 }, "\(monitor.out)")
        let members = monitor.out.components(separatedBy: "\n").filter { $0.contains("interface=org.mamfs.Mamfs1") }
            .compactMap { $0.components(separatedBy: "member=").last }
        #expect(members == ["Enrolled", "PolicyChanged", "Enrolled", "Wiped", "Unenrolled"], "\(monitor.out)")
        #expect(monitor.out.contains("path=/org/mamfs/Mamfs1"))
        for code in [100, 101, 227, 102, 104] { #expect(monitor.out.contains("uint32 \(code)"), "\(code)") }
        #expect(monitor.out.contains("string \"worker@contoso.com\""))
    }

    @Test("compliance check publishes ComplianceResult with the status's name and exit code and the failed check as the error")
    func complianceResultSignal() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let (dir, state, _) = try Self.freshState("mamfs-notify-compliance")
        let policy = dir.file("compliance.json")
        try Data(#"{"compliance": [{"check": "command", "command": ["/bin/false"]}]}"#.utf8).write(to: URL(fileURLWithPath: policy))
        let env = bus.environment
        #expect(try Self.mamfs(["enroll", Self.account, "--upn", "worker@contoso.com", "--policy", policy], state: state, env).status == 0)
        let events = try Self.listen(bus, ["--json", "--count", "2"])
        defer { events.stop() }
        #expect(try Self.mamfs(["compliance", "check", Self.account], state: state, env).status == 80)
        try Data(#"{"compliance": [{"check": "command", "command": ["/bin/true"]}]}"#.utf8).write(to: URL(fileURLWithPath: policy))
        #expect(try Self.mamfs(["policy", "set", Self.account, policy], state: state, SessionBus.noBusEnvironment(runtimeDirectory: dir.path)).status == 0)
        #expect(try Self.mamfs(["compliance", "check", Self.account], state: state, env).status == 0)
        #expect(events.waitForExit(timeout: 20) == 0, "mamfs events: \(events.err)")
        let lines = try Self.jsonLines(events.out)
        #expect(lines.map { $0["signal"] as? String } == ["ComplianceResult", "ComplianceResult"], "\(events.out)")
        #expect(lines.map { $0["result"] as? String } == ["NotCompliant", "Compliant"], "\(events.out)")
        #expect(lines.map { $0["statusCode"] as? Int } == [80, 0], "\(events.out)")
        #expect(lines.map { $0["accountId"] as? String } == [Self.account, Self.account])
        #expect(lines.first.flatMap { $0["error"] as? String }?.isEmpty == false, "\(events.out)")
        #expect(lines.last.flatMap { $0["error"] as? String } == "", "\(events.out)")
    }

    @Test("enroll, unenroll and wipe --json print one status object on success and on failure, with the failure's exit code")
    func jsonStatusShapes() throws {
        let (dir, state, policy) = try Self.freshState("mamfs-notify-json")
        let noBus = SessionBus.noBusEnvironment(runtimeDirectory: dir.path)
        func status(_ arguments: [String]) throws -> (Int32, [String: Any], String) {
            let result = try Self.mamfs(arguments + ["--json"], state: state, noBus)
            let lines = try Self.jsonLines(result.out)
            #expect(lines.count == 1, "\(arguments): \(result.out)")
            return (result.status, lines.first ?? [:], result.err)
        }
        let keys: Set<String> = ["accountId", "upn", "status", "statusCode", "error"]
        let (enrolled, enroll, enrollErr) = try status(["enroll", Self.account, "--upn", "w@contoso.com", "--policy", policy])
        #expect(enrolled == 0 && enrollErr == "")
        #expect(Set(enroll.keys) == keys)
        #expect(enroll["accountId"] as? String == Self.account && enroll["upn"] as? String == "w@contoso.com")
        #expect(enroll["status"] as? String == "NewPoliciesReceived" && enroll["statusCode"] as? Int == 100 && enroll["error"] is NSNull)
        let (refused, second, secondErr) = try status(["enroll", Self.other, "--policy", policy])
        #expect(refused == 64 && secondErr.contains("one managed account at a time"))
        #expect(second["status"] as? String == "SingleManagedAccountMode" && second["statusCode"] as? Int == 227)
        #expect((second["error"] as? String)?.contains("one managed account at a time") == true && second["upn"] is NSNull)
        let (unknown, missing, _) = try status(["unenroll", Self.other])
        #expect(unknown == 77)
        #expect(missing["status"] as? String == "NotEnrolledAccount" && missing["statusCode"] as? Int == 214)
        #expect(missing["accountId"] as? String == Self.other)
        let (wiped, wipe, _) = try status(["wipe", "w@contoso.com"])
        #expect(wiped == 0)
        #expect(wipe["status"] as? String == "WipeReceived" && wipe["statusCode"] as? Int == 102 && wipe["accountId"] as? String == Self.account)
        let (unenrolled, unenroll, _) = try status(["unenroll", Self.account])
        #expect(unenrolled == 0 && unenroll["statusCode"] as? Int == 104 && unenroll["status"] as? String == "UnenrollmentSuccess")
        // The allowed-accounts refusal happens before the library's enroll: still one status.
        #expect(try Self.mamfs(["accounts", "allow", Self.account], state: state, noBus).status == 0)
        let (denied, notAllowed, _) = try status(["enroll", Self.other, "--policy", policy])
        #expect(denied == 77 && notAllowed["status"] as? String == "NotEmmAccount" && notAllowed["statusCode"] as? Int == 209)
        // No state at all: the failure is an InternalError status.
        let (noState, broken, _) = try { () throws -> (Int32, [String: Any], String) in
            let result = try Self.mamfs(["wipe", Self.account, "--json"], state: dir.file("absent"), noBus)
            return (result.status, try Self.jsonLines(result.out).first ?? [:], result.err)
        }()
        #expect(noState == 66 && broken["statusCode"] as? Int == 201 && broken["status"] as? String == "InternalError")
    }

    @Test("mamfs events without a session bus, or with one that cannot be reached, exits 69 with one line")
    func eventsWithoutBus() throws {
        let dir = try TempDirectory(prefix: "mamfs-notify-nobus")
        let result = try runProcess(MamfsBinary.path, ["events", "--json"],
                                    environment: testEnvironment(SessionBus.noBusEnvironment(runtimeDirectory: dir.path)), timeout: 30)
        #expect(result.status == 69)
        #expect(result.err == "mamfs: events: no session bus (DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist)\n")
        #expect(result.out == "")
        let gone = try runProcess(MamfsBinary.path, ["events"],
                                  environment: testEnvironment(["DBUS_SESSION_BUS_ADDRESS": "unix:path=" + dir.file("no-such-bus")]), timeout: 30)
        #expect(gone.status == 69 && gone.err.hasPrefix("mamfs: events: the session bus unix:path=") && gone.err.split(separator: "\n").count == 1, "\(gone.err)")
    }

    @Test("a verb without a session bus succeeds; with -v one line says nothing was published")
    func verbWithoutBus() throws {
        let (dir, state, policy) = try Self.freshState("mamfs-notify-quiet")
        let noBus = SessionBus.noBusEnvironment(runtimeDirectory: dir.path)
        let quiet = try Self.mamfs(["enroll", Self.account, "--policy", policy], state: state, noBus)
        #expect(quiet.status == 0 && quiet.err == "", "\(quiet.err)")
        let verbose = try Self.mamfs(["policy", "set", Self.account, policy, "-v"], state: state, noBus)
        #expect(verbose.status == 0)
        #expect(verbose.err == "mamfs: policy set: no session bus (DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist): D-Bus signals are not published\n", "\(verbose.err)")
    }

    /// Any program on the session bus can send the interface's signals; their text went to
    /// the terminal raw.
    @Test("mamfs events writes control characters a sender put in a signal's text as escapes; --json keeps them")
    func forgedSignalEscaped() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        for json in [false, true] {
            let events = try Self.listen(bus, json ? ["--json"] : [])
            defer { events.stop() }
            let sent = try runProcess("/usr/bin/dbus-send", ["--bus=" + bus.address, "--type=signal", "/org/mamfs/Mamfs1",
                                                            "org.mamfs.Mamfs1.Enrolled", "string:acc", "string:u\u{1b}]0;owned\u{7}",
                                                            "uint32:100", "string:"], environment: testEnvironment())
            #expect(sent.status == 0, "\(sent.err)")
            #expect(events.wait { $0.out.hasSuffix("\n") }, "\(events.out)")
            if json {
                #expect(try Self.jsonLines(events.out).first?["upn"] as? String == "u\u{1b}]0;owned\u{7}")
            } else {
                #expect(events.out == "Enrolled accountId=acc upn=u\\x1b]0;owned\\x07 status=NewPoliciesReceived(100)\n")
            }
        }
    }

    @Test("mamfs events prints the human form and stops at SIGTERM with status 0")
    func humanFormAndSignal() throws {
        let bus = try SessionBus()
        defer { bus.stop() }
        let (dir, state, policy) = try Self.freshState("mamfs-notify-human")
        defer { withExtendedLifetime(dir) {} }
        let events = try Self.listen(bus, [])
        defer { events.stop() }
        #expect(try Self.mamfs(["enroll", Self.account, "--policy", policy], state: state, bus.environment).status == 0)
        #expect(events.wait { $0.out.hasSuffix("\n") }, "\(events.out)")
        #expect(events.out == "Enrolled accountId=\(Self.account) upn=\"\" status=NewPoliciesReceived(100)\n")
        events.signal(SIGTERM)
        #expect(events.waitForExit(timeout: 10) == 0)
    }
}
