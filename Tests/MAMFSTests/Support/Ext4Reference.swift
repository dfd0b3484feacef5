import Foundation
import Glibc
import MAMTestSupport
import Testing

/// A directory on ext4 to compare a mount with, byte for byte: the fixture's plain directory
/// when the temp directory is on ext4, else a small ext4 image mounted for the test (and
/// always unmounted by `close`).
final class Ext4Reference: @unchecked Sendable {
    let path: String
    private let disk: SmallFilesystem?

    init(_ m: MountedFixture) throws {
        if Ext4Reference.isExt4(m.plain) {
            path = m.plain
            disk = nil
        } else {
            let disk = try SmallFilesystem(.ext4, megabytes: 256)
            path = disk.path + "/reference"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            self.disk = disk
        }
    }

    /// Whether `path` lies on an ext4 filesystem (statfs f_type 0xef53, as `stat -f` reads it).
    static func isExt4(_ path: String) -> Bool {
        (try? shell("stat -f -c %t \(shellQuote(path))"))?.out == "ef53\n"
    }

    func close() { disk?.close() }

    deinit { close() }
}

/// Runs `body` with a fresh mount of `kind` and an ext4 directory to compare it with; both are
/// always torn down.
func withMountAndExt4<R>(_ kind: MountedFixture.Kind, options: [String] = [],
                         _ body: (MountedFixture, Ext4Reference) throws -> R) throws -> R {
    let m = try MountedFixture(kind, options: options)
    defer { m.close() }
    let reference = try Ext4Reference(m)
    defer { reference.close() }
    return try body(m, reference)
}

extension MountedFixture {
    /// Runs the python3 program `script` with `directory` as its argument, in the fixture's
    /// environment.
    func python(_ script: String, in directory: String, timeout: TimeInterval = 240) throws -> ProcessResult {
        try shell("python3 - \(shellQuote(directory)) <<'EOF'\n" + script + "\nEOF", environment: environment, timeout: timeout)
    }
}

extension MountedFixture {
    /// Runs the python3 program `script` (argv: a directory) as root in the mountpoint and in
    /// `reference`, both opened to every user first (the program may act as user nobody);
    /// returns each run's output lines. Records an issue when either run fails.
    func linesOnMountAndExt4(_ script: String, _ reference: Ext4Reference,
                             sourceLocation: SourceLocation = #_sourceLocation) throws -> (mount: [String], ext4: [String]) {
        _ = try shell("chmod 777 \(shellQuote(mountpoint)) \(shellQuote(reference.path)) && chmod 755 \(shellQuote(base))")
        let onMount = try python(script, in: mountpoint)
        let onExt4 = try python(script, in: reference.path)
        #expect(onMount.status == 0 && onExt4.status == 0, "\(onMount.err)\(onExt4.err)", sourceLocation: sourceLocation)
        return (onMount.out.split(separator: "\n").map(String.init), onExt4.out.split(separator: "\n").map(String.init))
    }
}
