import Foundation
import Testing
@testable import MAMProtection

/// A unique temporary directory for one test, removed afterwards.
private func withStateDirTestDir<T>(_ body: (URL) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("mamfs-statedir-test-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    return try body(dir)
}

private func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o7777
}

@Suite struct StateDirectoryTests {
    let env: [String: String] = [
        "MAMFS_STATE": "/env/state",
        "XDG_DATA_HOME": "/xdg/data",
        "HOME": "/home/user",
    ]

    @Test func explicitValueWinsOverEverything() {
        #expect(StateDirectory.resolve(explicit: "/explicit/dir", environment: env).url.path == "/explicit/dir")
    }

    @Test func environmentVariableComesSecond() {
        #expect(StateDirectory.resolve(explicit: nil, environment: env).url.path == "/env/state")
    }

    @Test func xdgDataHomeComesThird() {
        var environment = env
        environment["MAMFS_STATE"] = nil
        #expect(StateDirectory.resolve(explicit: nil, environment: environment).url.path == "/xdg/data/mamfs")
    }

    @Test func homeComesLast() {
        let environment = ["HOME": "/home/user"]
        #expect(StateDirectory.resolve(explicit: nil, environment: environment).url.path == "/home/user/.local/share/mamfs")
    }

    @Test func emptyAndRelativeValuesCountAsUnset() {
        let environment = ["MAMFS_STATE": "", "XDG_DATA_HOME": "relative/data", "HOME": "/home/user"]
        #expect(StateDirectory.resolve(explicit: "", environment: environment).url.path == "/home/user/.local/share/mamfs")
    }

    @Test func tildeIsExpandedWithTheGivenHome() {
        #expect(StateDirectory.resolve(explicit: "~/st", environment: env).url.path == "/home/user/st")
    }

    @Test func relativeExplicitPathIsMadeAbsolute() {
        let resolved = StateDirectory.resolve(explicit: "some/dir", environment: env).url.path
        #expect(resolved == FileManager.default.currentDirectoryPath + "/some/dir")
    }

    @Test func fileURLsInsideTheDirectory() {
        let dir = StateDirectory(path: "/a/b/")
        #expect(dir.url.path == "/a/b")
        #expect(dir.databaseURL.path == "/a/b/state.db")
        #expect(dir.masterKeyURL.path == "/a/b/master.key")
    }

    @Test func createMakesParentsAndA0700Directory() throws {
        try withStateDirTestDir { tmp in
            let dir = StateDirectory(url: tmp.appendingPathComponent("x/y/state"))
            #expect(!dir.exists)
            try dir.create()
            #expect(dir.exists)
            #expect(fileMode(dir.url.path) == 0o700)
            try dir.create()
            #expect(fileMode(dir.url.path) == 0o700)
        }
    }

    @Test func createFailsWhenAComponentIsAFile() throws {
        try withStateDirTestDir { tmp in
            let file = tmp.appendingPathComponent("plainfile")
            try Data("x".utf8).write(to: file)
            let dir = StateDirectory(url: file.appendingPathComponent("state"))
            #expect {
                try dir.create()
            } throws: { error in
                guard case MAMError.cannotCreateOutput = error else { return false }
                return true
            }
        }
    }
}
