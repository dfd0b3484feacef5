import Foundation
import Testing

@Suite("Security: the state directory and key file belong to their user alone")
struct SecurityStateTests {
    func mode(_ path: String) -> mode_t {
        var st = stat()
        guard stat(path, &st) == 0 else { return 0 }
        return st.st_mode & 0o7777
    }

    @Test("init on an existing 0777 directory sets it to 0700 and says so")
    func initFixesAWorldWritableDirectory() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        #expect(chmod(sandbox.state, 0o777) == 0)
        let result = try sandbox.run(["init"])
        #expect(result.status == 0, "\(result.err)")
        #expect(mode(sandbox.state) == 0o700, "mode is \(String(mode(sandbox.state), radix: 8))")
        #expect((result.out + result.err).contains("0700"), "\(result.out) \(result.err)")
    }

    @Test("init refuses a state directory owned by another user (77)")
    func initRefusesAnotherUsersDirectory() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        #expect(chown(sandbox.state, 65534, 65534) == 0)
        let result = try sandbox.run(["init"])
        #expect(result.status == 77, "\(result.status) \(result.err)")
        #expect(result.err.contains("owned by"), "\(result.err)")
        #expect(!sandbox.exists(sandbox.state + "/state.db"))
    }

    @Test("a state directory or master key others can write, or owned by another user, is refused (77)",
          arguments: ["dir-0777", "dir-0770", "key-0666", "key-0620", "dir-owner", "key-owner"])
    func openRefusesUnsafeState(_ change: String) throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let key = sandbox.state + "/master.key"
        switch change {
        case "dir-0777": #expect(chmod(sandbox.state, 0o777) == 0)
        case "dir-0770": #expect(chmod(sandbox.state, 0o770) == 0)
        case "key-0666": #expect(chmod(key, 0o666) == 0)
        case "key-0620": #expect(chmod(key, 0o620) == 0)
        case "dir-owner": #expect(chown(sandbox.state, 65534, 65534) == 0)
        default: #expect(chown(key, 65534, 65534) == 0)
        }
        let result = try sandbox.run(["accounts"])
        #expect(result.status == 77, "\(change): \(result.status) \(result.err)")
        #expect(result.err.contains(change.hasPrefix("dir") ? "state directory" : "master key"), "\(result.err)")
        #expect(result.errLines.count == 1)
    }

    @Test("a state directory another user cannot read reports permission denied (77), not a missing state")
    func unreadableStateIsPermissionDenied() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        #expect(mode(sandbox.state) == 0o700)
        chmod(sandbox.root, 0o755)
        let result = try runProcess("/usr/bin/setpriv",
                                    ["--reuid=65534", "--regid=65534", "--clear-groups", MamfsLocator.path,
                                     "accounts", "--state", sandbox.state],
                                    stdin: Data(), environment: sandbox.environment)
        #expect(result.status == 77, "\(result.status) \(result.err)")
        #expect(result.err.lowercased().contains("permission denied"), "\(result.err)")
        #expect(!result.err.contains("no mamfs state"), "\(result.err)")
    }
}
