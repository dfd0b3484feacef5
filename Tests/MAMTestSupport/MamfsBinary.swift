import Foundation

/// Where the built `mamfs` command is.
public enum MamfsBinary {
    /// `$MAMFS_BIN`, else the first directory above the test bundle (or the test process's
    /// argv[0]) that holds an executable file named `mamfs`; else a name that no program has,
    /// so every run fails saying to set MAMFS_BIN.
    public static let path: String = locate()

    private static func locate() -> String {
        if let explicit = ProcessInfo.processInfo.environment["MAMFS_BIN"], !explicit.isEmpty {
            return explicit
        }
        let starts = [Bundle.main.bundlePath, CommandLine.arguments.first ?? ""]
            .filter { !$0.isEmpty }
            .map { URL(fileURLWithPath: $0).standardizedFileURL }
        for start in starts {
            var directory = start
            for _ in 0..<8 {
                let candidate = directory.appendingPathComponent("mamfs").path
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate) {
                    return candidate
                }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return "mamfs-binary-not-found (set MAMFS_BIN)"
    }
}
