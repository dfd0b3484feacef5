import Foundation
import Glibc

/// Writes `text` as an executable file (mode 0755) at `path`, replacing what is there, so that
/// it can be executed at once from a test process in which other tests start processes.
///
/// The bytes are written by a child process (`sh`: a new file, then renamed into place), so this
/// process never holds a descriptor open for writing on the file. One it held would be in the
/// descriptor table of any process another test starts meanwhile, from that process' clone
/// until its exec (or its whole life, without O_CLOEXEC), and an execve of the file in that
/// window fails with ETXTBSY ("Text file busy").
/// - Throws: `TestSupportError` with the shell's message.
public func writeExecutable(_ path: String, _ text: String) throws {
    let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
    let result = try runProcess("/bin/sh", ["-c", "cat > \"$1\" && chmod 755 \"$1\" && mv -f \"$1\" \"$2\"", "sh", temporary, path],
                                stdin: Data(text.utf8), environment: ProcessInfo.processInfo.environment, timeout: 60)
    guard result.status == 0 else {
        unlink(temporary)
        throw TestSupportError("cannot write \(path): \(result.err)")
    }
}
