import Foundation
import Glibc
import MAMTestSupport

/// Counts the requests the kernel sends to one mount's FUSE connection while a script runs,
/// from the `fuse:fuse_request_send` tracepoint (tracefs; kernel 6.14 or later; root). The
/// tracepoint's filter and buffer belong to the machine, so one count runs at a time in this
/// process.
enum FuseRequestTrace {
    private static let lock = NSLock()

    /// Whether the tracepoint can be used (tracefs is mounted on demand).
    static var isAvailable: Bool {
        guard geteuid() == 0 else { return false }
        if access("/sys/kernel/tracing/events/fuse/fuse_request_send", F_OK) != 0 {
            _ = try? shell("mount -t tracefs nodev /sys/kernel/tracing")
        }
        return access("/sys/kernel/tracing/events/fuse/fuse_request_send/enable", W_OK) == 0
    }

    /// Runs `script` (bash, in the mountpoint, with the fixture's environment) and returns its
    /// result with the number of requests per opcode name (e.g. "FUSE_FLUSH") the kernel sent
    /// to the mount meanwhile. The connection is the mount's dev_t as the kernel numbers it
    /// (major << 20 | minor).
    static func count(_ m: MountedFixture, while script: String) throws -> (status: Int32, out: String, err: String, requests: [String: Int]) {
        lock.lock()
        defer { lock.unlock() }
        let scriptFile = m.base + "/traced.sh"
        try Data(script.utf8).write(to: URL(fileURLWithPath: scriptFile))
        let r = try m.sh(#"""
        T=/sys/kernel/tracing; E=$T/events/fuse/fuse_request_send
        dev=$(python3 -c 'import os, sys; d = os.stat(sys.argv[1]).st_dev; print((os.major(d) << 20) | os.minor(d))' "$M")
        trap 'echo 0 > $E/enable; echo 0 > $E/filter' EXIT
        echo "connection == $dev" > $E/filter && echo > $T/trace && echo 1 > $E/enable
        bash "$BASE/traced.sh" > "$BASE/traced.out"
        status=$?
        echo 0 > $E/enable
        cat "$BASE/traced.out"
        grep -o "connection $dev req [0-9]* opcode [0-9]* ([A-Z_]*)" $T/trace | sed 's/.*(\(.*\))/REQUEST \1/'
        exit $status
        """#)
        var requests: [String: Int] = [:]
        var output: [Substring] = []
        for line in r.out.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("REQUEST ") {
                requests[String(line.dropFirst("REQUEST ".count)), default: 0] += 1
            } else {
                output.append(line)
            }
        }
        return (r.status, output.joined(separator: "\n"), r.err, requests)
    }
}
