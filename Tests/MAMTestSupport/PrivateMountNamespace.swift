import CSystem
import Foundation

/// A thread of its own mount namespace, for a test whose assertions must see no mount or
/// unmount but its own: the tests that run beside it mount and unmount in the process's
/// namespace, and a watch of the mount table (poll(2) of a mountinfo file, proc(5)) would
/// report those.
public enum PrivateMountNamespace {
    /// Whether this process may make one: unshare(2) CLONE_NEWNS needs CAP_SYS_ADMIN in its
    /// effective set (bit 21 of `CapEff` in /proc/self/status; root in a container may lack
    /// it), and a multi-threaded process cannot make a user namespace to get it.
    public static var isAvailable: Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16) else {
            return false
        }
        return mask & (1 << 21) != 0
    }

    /// Runs `body` on a new thread that has left this process's mount namespace for a copy of
    /// it whose mounts propagate neither way (unshare(2) CLONE_NEWNS, then MS_REC | MS_PRIVATE
    /// on /), and waits for it. The namespace, and any mount `body` left in it, goes with the
    /// thread. /proc/thread-self/mountinfo on that thread is the copy's table; /proc/self/
    /// mountinfo stays the process's (`FuseMounts.isMounted(_:in:)` reads either).
    /// - Throws: `TestSupportError` naming the errno of unshare or mount (EPERM when not
    ///   root), or what `body` throws.
    public static func run<T>(_ body: @escaping () throws -> T) throws -> T {
        let outcome = ThreadOutcome<T>(body)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            guard mamfs_unshare_mount_namespace() == 0 else {
                outcome.result = .failure(TestSupportError("unshare(CLONE_NEWNS): \(String(cString: strerror(errno)))"))
                return
            }
            guard mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil) == 0 else {
                outcome.result = .failure(TestSupportError("mount(MS_REC | MS_PRIVATE) of /: \(String(cString: strerror(errno)))"))
                return
            }
            outcome.result = Result { try outcome.body() }
        }
        thread.start()
        done.wait()
        return try outcome.result!.get()
    }
}

/// A thread's body, and what it returned or threw (read once the thread signalled its end).
private final class ThreadOutcome<T>: @unchecked Sendable {
    let body: () throws -> T
    var result: Result<T, any Error>?
    init(_ body: @escaping () throws -> T) { self.body = body }
}
