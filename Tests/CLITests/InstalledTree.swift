import Foundation
import Synchronization
import MAMTestSupport

/// A `make install DESTDIR=ROOT PREFIX=...` of this repository into a fresh temporary directory,
/// with the built test binary as the installed `mamfs` (`INSTALL_BIN`, so nothing is compiled).
/// Removed with everything in it when the value goes away.
final class InstalledTree {
    /// The repository (the directory holding the Makefile).
    static let repository: String = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// True when this process may open /dev/fuse (the tests that mount need it).
    static let fuseUsable: Bool = {
        let fd = open("/dev/fuse", O_RDWR)
        if fd >= 0 { close(fd) }
        return fd >= 0
    }()

    /// One `make` at a time: parallel runs would write the same generated man pages.
    private static let makeLock = Mutex<Void>(())

    private let directory: TempDirectory
    /// DESTDIR.
    let root: String
    let prefix: String

    /// Runs `make install DESTDIR=ROOT PREFIX=prefix INSTALL_BIN=mamfs` (and `extra` variables).
    /// - Throws: `SandboxError` when make fails.
    init(prefix: String? = "/usr", extra: [String] = []) throws {
        directory = try TempDirectory(prefix: "mamfs-install")
        root = directory.file("root")
        self.prefix = prefix ?? "/usr/local"
        let variables = ["DESTDIR=\(root)", "INSTALL_BIN=\(MamfsBinary.path)"] + (prefix.map { ["PREFIX=\($0)"] } ?? []) + extra
        let result = try Self.make(["install"] + variables)
        guard result.status == 0 else { throw SandboxError.failed("make install", result) }
    }

    /// Runs `make -s ARGUMENTS` in the repository, one at a time.
    static func make(_ arguments: [String]) throws -> ProcessResult {
        try makeLock.withLock { _ in
            try runProcess("/usr/bin/make", ["-s", "--no-print-directory", "-C", repository] + arguments,
                           environment: testEnvironment(), timeout: 300)
        }
    }

    /// `ROOT` + an installed path (`/usr/bin/mamfs`).
    func path(_ installed: String) -> String { root + installed }

    /// The installed file's text.
    func text(_ installed: String) throws -> String {
        try String(contentsOfFile: path(installed), encoding: .utf8)
    }

    /// Every entry below ROOT as "TYPE MODE /PATH" (TYPE f, d or l; MODE octal without the file
    /// type), sorted: what the install tests compare.
    func listing() -> [String] {
        Self.listing(of: root)
    }

    static func listing(of root: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        var entries: [String] = []
        while let relative = enumerator.nextObject() as? String {
            var st = stat()
            guard lstat(root + "/" + relative, &st) == 0 else { continue }
            let type: String
            switch st.st_mode & S_IFMT {
            case S_IFDIR: type = "d"
            case S_IFLNK: type = "l"
            case S_IFREG: type = "f"
            default: type = "?"
            }
            entries.append("\(type) \(String(st.st_mode & 0o7777, radix: 8)) /\(relative)")
        }
        return entries.sorted()
    }
}
