import Foundation
import Glibc

/// Kills an `ApacheDAVServer` in the middle of an upload: a thread watches the collection's
/// top directory with inotify and, as soon as a file being written there (the server's
/// temporary file of a PUT, or the target itself) holds `threshold` bytes or more, sends the
/// server SIGKILL (`ApacheDAVServer.kill()`), so the client sees the connection drop while it
/// still has bytes to send.
public final class ServerKillDuringUpload: @unchecked Sendable {
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private var _killedAt: (name: String, size: Int64)?
    private var stopping = false

    /// Starts watching `server.davDirectory` (its top level only) for up to `timeout` seconds
    /// (nominal, stretched by `Patience`).
    /// - Throws: `TestSupportError` when inotify cannot be set up.
    public init(_ server: ApacheDAVServer, threshold: Int64, timeout: Double = 60) throws {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw TestSupportError("inotify_init1: \(String(cString: strerror(errno)))") }
        let directory = server.davDirectory
        guard inotify_add_watch(fd, directory, UInt32(IN_MODIFY | IN_CREATE)) >= 0 else {
            close(fd)
            throw TestSupportError("inotify_add_watch \(directory): \(String(cString: strerror(errno)))")
        }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { close(fd); throw TestSupportError("open \(directory)") }
        Thread.detachNewThread { [self] in
            defer { close(fd); close(directoryFD); done.signal() }
            let deadline = Date().addingTimeInterval(Patience.bound(timeout))
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while Date() < deadline && !lock.withLock({ stopping }) {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 50) > 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard n > 0 else { continue }
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= n {
                    let (length, name) = buffer.withUnsafeBytes { raw -> (Int, String) in
                        let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                        let start = offset + MemoryLayout<inotify_event>.size
                        let bytes = raw[start..<min(start + Int(event.len), n)].prefix { $0 != 0 }
                        return (Int(event.len), String(decoding: bytes, as: UTF8.self))
                    }
                    offset += MemoryLayout<inotify_event>.size + length
                    var st = stat()
                    guard !name.isEmpty, fstatat(directoryFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0,
                          (st.st_mode & S_IFMT) == S_IFREG, Int64(st.st_size) >= threshold else { continue }
                    server.kill()
                    lock.withLock { _killedAt = (name, Int64(st.st_size)) }
                    return
                }
            }
        }
    }

    /// Waits until the server was killed or the watch ended; returns the name of the file
    /// being written and its size at that moment (nil: no upload reached the threshold).
    public func wait() -> (name: String, size: Int64)? {
        done.wait()
        done.signal()
        return lock.withLock { _killedAt }
    }

    /// Ends the watch without killing (when the scenario is over early). Idempotent.
    public func stop() -> (name: String, size: Int64)? {
        lock.withLock { stopping = true }
        return wait()
    }
}
