import Foundation

/// A forked child of a test: what it wrote back and how it ended, with a timeout so that a
/// hang ends the child instead of the test run.
public enum ForkedChild {
    /// How a child ended (`waitpid`'s status; -1 when it could not be forked or waited for)
    /// and the bytes it wrote to the parent.
    public struct Outcome {
        public let status: Int32
        public let bytes: [UInt8]
    }

    /// Forks; the child arms its timeout (`armTimeout`), runs `body`, writes the bytes `body`
    /// returns to the parent and exits 0, or exits 1 when `body` returns nil (`body` may also
    /// `_exit` with a code of its own). The parent reads until the child ends and waits for it.
    /// Only the forking thread lives on in the child: a lock another thread held at the fork
    /// hangs it until the timeout's SIGALRM.
    public static func run(timeout seconds: UInt32 = 20, _ body: () -> [UInt8]?) -> Outcome {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { return Outcome(status: -1, bytes: []) }
        let child = fork()
        if child == 0 {
            armTimeout(seconds: seconds)
            close(pipeEnds[0])
            guard let bytes = body() else { _exit(1) }
            let written = bytes.withUnsafeBytes { write(pipeEnds[1], $0.baseAddress, $0.count) }
            _exit(written == bytes.count ? 0 : 1)
        }
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        guard child > 0 else { return Outcome(status: -1, bytes: []) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = chunk.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
            if got > 0 { bytes += chunk[0..<got]; continue }
            if got < 0 && errno == EINTR { continue }
            break
        }
        var status: Int32 = 0
        guard waitpid(child, &status, 0) == child else { return Outcome(status: -1, bytes: bytes) }
        return Outcome(status: status, bytes: bytes)
    }

    /// Ends the calling (forked) process with SIGALRM after `seconds`: unblocks SIGALRM in the
    /// calling thread (the threads tests run on block most signals, and a child inherits the
    /// mask of the thread that forked it, so a bare `alarm` would never fire) and arms the alarm.
    /// The parent's `waitpid` then sees a signal status instead of waiting forever.
    public static func armTimeout(seconds: UInt32) {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGALRM)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
        signal(SIGALRM, SIG_DFL)
        alarm(seconds)
    }
}
