import Foundation
import Testing
import MAMProtection
import MAMTestSupport

let systemdAnalyzeAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze")

@Suite("Install: the systemd unit templates")
struct SystemdUnitTests {
    static let units = [(kind: "system", path: "/usr/lib/systemd/system/mamfs@.service"),
                        (kind: "user", path: "/usr/lib/systemd/user/mamfs@.service")]

    /// A unit file's `Key=value` lines of section `section`, in order.
    static func settings(_ text: String, section: String) -> [(key: String, value: String)] {
        var current = ""
        var settings: [(key: String, value: String)] = []
        for line in text.split(separator: "\n").map(String.init) where !line.hasPrefix("#") {
            if line.hasPrefix("[") { current = line; continue }
            guard current == "[\(section)]", let equals = line.firstIndex(of: "=") else { continue }
            settings.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
        }
        return settings
    }

    /// A command line of an Exec*= setting as systemd runs it: `%h` and `%i` replaced, `${VAR}`
    /// as one word (empty when unset), `$VAR` as the value split at white space (no word when
    /// unset), other words as they are.
    static func commandLine(_ value: String, variables: [String: String], home: String, instance: String) -> [String] {
        value.split(separator: " ").flatMap { word -> [String] in
            let word = word.replacingOccurrences(of: "%h", with: home).replacingOccurrences(of: "%i", with: instance)
            if word.hasPrefix("${"), word.hasSuffix("}") { return [variables[String(word.dropFirst(2).dropLast())] ?? ""] }
            if word.hasPrefix("$") { return (variables[String(word.dropFirst())] ?? "").split(separator: " ").map(String.init) }
            return [word]
        }
    }

    @Test("systemd-analyze verify accepts both units without a warning (their man pages found in the installed tree)",
          .enabled(if: systemdAnalyzeAvailable), arguments: units.map(\.kind))
    func verify(kind: String) throws {
        let tree = try InstalledTree(prefix: "/usr")
        let unit = try #require(Self.units.first { $0.kind == kind })
        let scratch = try TempDirectory(prefix: "mamfs-units")
        // The unit as installed, but naming the binary in the tree: verify checks that it exists.
        let text = try tree.text(unit.path).replacingOccurrences(of: "/usr/bin/mamfs", with: tree.path("/usr/bin/mamfs"))
        try Data(text.utf8).write(to: URL(fileURLWithPath: scratch.file("mamfs@.service")))
        try FileManager.default.createDirectory(atPath: scratch.file("runtime"), withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        let environment = testEnvironment(["MANPATH": tree.path("/usr/share/man"), "XDG_RUNTIME_DIR": scratch.file("runtime")])
        let result = try runProcess("/usr/bin/systemd-analyze", (kind == "user" ? ["--user"] : []) + ["verify", scratch.file("mamfs@check.service")],
                                    environment: environment)
        #expect(result.status == 0, "\(result.err)")
        #expect(result.err == "", "systemd-analyze verify: \(result.err)")
    }

    @Test("both units read NAME.conf, run mamfs mount -f in the foreground and unmount on stop; system state in /var/lib/mamfs")
    func unitSettings() throws {
        let tree = try InstalledTree(prefix: "/usr")
        for unit in Self.units {
            let service = Dictionary(Self.settings(try tree.text(unit.path), section: "Service"), uniquingKeysWith: { $1 })
            #expect(service["Type"] == "exec", "\(unit.kind)")
            #expect(service["EnvironmentFile"] == (unit.kind == "user" ? "%h/.config/mamfs/%i.conf" : "/etc/mamfs/%i.conf"))
            #expect(service["ExecStart"]?.hasPrefix("/usr/bin/mamfs mount -f --force ${BACKING} ${MOUNTPOINT} ") == true)
            #expect(service["Restart"] == "on-failure")
            #expect(service["ExecStop"] == "/usr/bin/mamfs unmount ${MOUNTPOINT}")
            #expect(service["Environment"] == (unit.kind == "system" ? "MAMFS_STATE=/var/lib/mamfs" : nil))
            let install = Dictionary(Self.settings(try tree.text(unit.path), section: "Install"), uniquingKeysWith: { $1 })
            #expect(install["WantedBy"] == (unit.kind == "user" ? "default.target" : "multi-user.target"))
        }
    }

    /// Starts `command` (an ExecStart= command line) as the unit's main process, its stderr
    /// (what the journal would get) in the file `stderr`, and waits up to 10 s for `mountpoint`
    /// to answer as a mamfs mount.
    static func startMainProcess(_ command: [String], environment: [String: String], mountpoint: String,
                                 stderr: String) throws -> Process {
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: command[0])
        daemon.arguments = Array(command.dropFirst())
        daemon.environment = environment
        daemon.standardOutput = FileHandle.nullDevice
        FileManager.default.createFile(atPath: stderr, contents: nil)
        daemon.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderr))
        try daemon.run()
        // Up to a minute: under a whole parallel `make test` a start (after removing a dead
        // mount) took longer than 10 s; a start that works ends the wait at once.
        // statvfs, not stat: a dead mount's root still answers stat from the kernel's cached
        // attributes, while a STATFS reaches the daemon (ENOTCONN on a dead mount).
        var fs = statvfs()
        Patience.waitUntil(60) { FuseMounts.isMounted(mountpoint) && statvfs(mountpoint, &fs) == 0 }
        return daemon
    }

    @Test("the user unit's commands, run as systemd runs them with a NAME.conf, mount the configured directory, mount it again after the daemon was killed (Restart=), and unmount it on stop",
          .enabled(if: InstalledTree.fuseUsable))
    func userUnitMountsAndStops() throws {
        let tree = try InstalledTree(prefix: "/usr")
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let home = sandbox.environment["HOME"] ?? sandbox.path("home")
        let backing = sandbox.path("backing"), mountpoint = sandbox.path("Work"), log = sandbox.path("mount.log")
        for directory in [backing, mountpoint, home + "/.config/mamfs"] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        defer { FuseMounts.tearDown(mountpoint) }
        try Data("""
            BACKING=\(backing)
            MOUNTPOINT=\(mountpoint)
            ACCOUNT=\(Fixtures.upn)
            MAMFS_STATE=\(sandbox.state)
            MAMFS_ARGS=-o log=\(log)

            """.utf8).write(to: URL(fileURLWithPath: home + "/.config/mamfs/work.conf"))

        let text = try tree.text("/usr/lib/systemd/user/mamfs@.service")
            .replacingOccurrences(of: "/usr/bin/mamfs", with: tree.path("/usr/bin/mamfs"))
        let service = Dictionary(Self.settings(text, section: "Service"), uniquingKeysWith: { $1 })
        let configPath = try #require(service["EnvironmentFile"]).replacingOccurrences(of: "%h", with: home)
            .replacingOccurrences(of: "%i", with: "work")
        var variables: [String: String] = [:]
        for line in try String(contentsOfFile: configPath, encoding: .utf8).split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            variables[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        var environment = sandbox.environment
        for (key, value) in variables { environment[key] = value }
        let start = Self.commandLine(try #require(service["ExecStart"]), variables: variables, home: home, instance: "work")
        #expect(start == [tree.path("/usr/bin/mamfs"), "mount", "-f", "--force", backing, mountpoint, "--account", Fixtures.upn, "-o", "log=\(log)"])

        let first = try Self.startMainProcess(start, environment: environment, mountpoint: mountpoint, stderr: sandbox.path("start-1.err"))
        defer { if first.isRunning { first.terminate() } }
        #expect(FuseMounts.isMounted(mountpoint), "ExecStart mounted \(mountpoint)")
        guard FuseMounts.isMounted(mountpoint) else { return }

        let original = try sandbox.read(Fixtures.gpl3)
        try original.write(to: URL(fileURLWithPath: mountpoint + "/GPL-3"))
        let written = FileManager.default.contents(atPath: mountpoint + "/GPL-3")
        #expect(written == original, "read back through the mount (\(written?.count ?? -1) bytes; errno \(errno)): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let info = try jsonArray(try sandbox.run(["info", "--json", backing + "/GPL-3"]))
        #expect(info.first?["owner"] as? String == Fixtures.account, "new files belong to ACCOUNT")
        #expect(info.first?["encrypted"] as? Bool == true)

        // The daemon dies: the mount is left dead; systemd runs ExecStart again, which removes it.
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect(FuseMounts.isMounted(mountpoint), "a dead mount is left behind")
        let daemon = try Self.startMainProcess(start, environment: environment, mountpoint: mountpoint, stderr: sandbox.path("start-2.err"))
        defer { if daemon.isRunning { daemon.terminate() } }
        #expect(daemon.isRunning, "the restarted main process runs")
        let said2 = { ((try? String(contentsOfFile: sandbox.path("start-2.err"), encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "") }
        var fs = statvfs()
        try #require(FuseMounts.isMounted(mountpoint) && statvfs(mountpoint, &fs) == 0,
                     "the restarted main process mounted \(mountpoint): \(said2())")
        let reread = FileManager.default.contents(atPath: mountpoint + "/GPL-3")
        #expect(reread == original, "the file reads through the new mount (\(reread?.count ?? -1) bytes; errno \(errno)): \(said2())")
        let said = try String(contentsOfFile: sandbox.path("start-2.err"), encoding: .utf8) + String(contentsOfFile: log, encoding: .utf8)
        #expect(said.contains("\(mountpoint) was a dead mount"), "the restart says it removed the dead mount: \(said)")

        let stop = Self.commandLine(try #require(service["ExecStop"]), variables: variables, home: home, instance: "work")
        let stopped = try runProcess(stop[0], Array(stop.dropFirst()), environment: environment)
        #expect(stopped.status == 0, "ExecStop: \(stopped.err)")
        Patience.waitUntil(60) { !daemon.isRunning }
        #expect(!daemon.isRunning, "the unit's main process exits after ExecStop")
        if !daemon.isRunning { #expect(daemon.terminationStatus == 0) }
        #expect(!FuseMounts.isMounted(mountpoint))
    }
}
