import Foundation

/// Runs `script` with bash (`bash -c`) through `runProcess`: stdin is empty, outputs go through
/// files, the script leads its own process group and the whole group is killed after `timeout`
/// seconds (status 124).
///
/// The environment is the test process's without `MAMFS_STATE`, with `LC_ALL=C` and `TZ=UTC`
/// (so tools print the same everywhere), plus `extra`.
/// - Throws: `TestSupportError` when bash cannot be started.
@discardableResult
public func shell(_ script: String, environment extra: [String: String] = [:], timeout: TimeInterval = 300) throws -> ProcessResult {
    try runProcess("/bin/bash", ["-c", script], environment: testEnvironment(extra), timeout: timeout)
}

/// The test process's environment without `MAMFS_STATE`, with `LC_ALL=C` and `TZ=UTC`, plus `extra`.
public func testEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["MAMFS_STATE"] = nil
    environment["LC_ALL"] = "C"
    environment["TZ"] = "UTC"
    for (key, value) in extra { environment[key] = value }
    return environment
}

/// `text` as one bash word: in single quotes, each `'` written as `'\''`.
public func shellQuote(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
