import CSystem
import Foundation
import Glibc
import MAMProtection
import MAMSystem
import Synchronization

/// The mount daemon's end of `mamfs lock|unlock MOUNTPOINT`: an abstract unix socket named
/// after the daemon's pid, served by one thread.
///
/// Only the daemon's own user (or root) is served: the peer's SO_PEERCRED uid is checked on
/// every connection. The client checks in turn that the socket's owner is the mount's daemon
/// (its SO_PEERCRED pid), so a process that took the name first never sees a passphrase.
final class DaemonControlServer: @unchecked Sendable {
    private let listener: Int32
    /// The request, the mountpoint it names, the passphrase bytes.
    private let handle: @Sendable (DaemonControlRequest, String, UnsafeRawBufferPointer) -> (ExitCode, String)
    private let log: @Sendable (String) -> Void
    private let stopping = NSLock()
    private var stopped = false
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    /// Binds a fresh socket name of this daemon (`DaemonControlSocket.freshName`; another is
    /// drawn when one is taken).
    /// - Throws: `MAMError` when sockets or the random source fail.
    init(handle: @escaping @Sendable (DaemonControlRequest, String, UnsafeRawBufferPointer) -> (ExitCode, String),
         log: @escaping @Sendable (String) -> Void) throws {
        var fd: Int32 = -1
        for _ in 0..<8 {
            fd = mamfs_abstract_listen(try DaemonControlSocket.freshName(daemon: getpid()))
            if fd >= 0 || errno != EADDRINUSE { break }
        }
        guard fd >= 0 else { throw MAMError.fromErrno("control socket") }
        listener = fd
        self.handle = handle
        self.log = log
    }

    /// Starts serving on a thread of its own.
    func start() {
        let thread = Thread { [self] in
            serve()
            finished.signal()
        }
        thread.name = "mamfs-control"
        self.thread = thread
        thread.start()
    }

    /// Stops serving (returns once the thread has ended) and closes the socket.
    func stop() {
        stopping.lock()
        let first = !stopped
        stopped = true
        stopping.unlock()
        guard first else { return }
        // Wakes the poll at once: the daemon holds its /dev/fuse descriptor until this returns,
        // and a daemon that lingers with it can be taken for one of a new mount's.
        shutdown(listener, Int32(SHUT_RDWR))
        if thread != nil { finished.wait() }
        close(listener)
    }

    private var isStopped: Bool {
        stopping.lock(); defer { stopping.unlock() }
        return stopped
    }

    /// Connections answered at once; more are told the daemon is busy (75).
    static let concurrentRequests = 4
    private let active = NSCondition()
    private var activeCount = 0

    /// Accepts connections; each is answered on a thread of its own (at most
    /// `concurrentRequests`), so a client that keeps its connection open without sending holds
    /// up nobody else. Returns once stopped and every answer is done.
    private func serve() {
        while !isStopped {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { continue }
            let client = mamfs_accept(listener)
            guard client >= 0 else { continue }
            active.lock()
            let admitted = activeCount < Self.concurrentRequests
            if admitted { activeCount += 1 }
            active.unlock()
            guard admitted else {
                reply(client, .tempFail, "busy: \(Self.concurrentRequests) requests are being answered, try again")
                close(client)
                continue
            }
            Thread { [self] in
                answer(client)
                close(client)
                active.lock()
                activeCount -= 1
                active.broadcast()
                active.unlock()
            }.start()
        }
        active.lock()
        while activeCount > 0 { active.wait() }
        active.unlock()
    }

    /// Reads one request from `client` (at most 2 s), checks its user and answers it.
    private func answer(_ client: Int32) {
        var peer = mamfs_peer_credentials()
        guard mamfs_peer_credentials(client, &peer) == 0 else { return }
        guard peer.uid == 0 || peer.uid == geteuid() else {
            if refusals.withLock({ $0.admit("uid \(peer.uid)", now: MonotonicClock.seconds()) }) != nil {
                let allowed = geteuid() == 0 ? "root" : "uid \(geteuid()) or root"
                log("control request from uid \(peer.uid) (pid \(peer.pid)) refused: only \(allowed) may lock or unlock this mount (further refusals of this uid are not logged for \(Int(LogRateLimit.standardInterval)) s)")
            }
            reply(client, .noPerm, "only the mount's own user or root may lock or unlock it")
            return
        }
        let deadline = MonotonicClock.seconds() + Self.requestTimeout
        let capacity = DaemonControlRequest.maximumLength + 1
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        // The passphrase passes through here: wiped before the memory is given back.
        defer {
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            buffer.deallocate()
        }
        var count = 0
        // The whole request within `requestTimeout`: a client that trickles bytes cannot hold
        // the only serving thread.
        while count < capacity {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else {
                reply(client, .usage, "the request did not arrive within \(Int(Self.requestTimeout)) s")
                return
            }
            var poller = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(left * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            let n = read(client, buffer.baseAddress! + count, capacity - count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            count += n
        }
        guard count <= DaemonControlRequest.maximumLength else {
            reply(client, .usage, "the request is longer than \(DaemonControlRequest.maximumLength) bytes")
            return
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")),
              let request = DaemonControlRequest(rawValue: String(decoding: bytes[0..<newline], as: UTF8.self)) else {
            reply(client, .usage, "unknown request (expected: \(DaemonControlRequest.allCases.map(\.rawValue).joined(separator: ", ")))")
            return
        }
        guard let second = bytes[(newline + 1)...].firstIndex(of: UInt8(ascii: "\n")) else {
            reply(client, .usage, "the request names no mountpoint")
            return
        }
        let mountpoint = String(decoding: bytes[(newline + 1)..<second], as: UTF8.self)
        let (code, message) = handle(request, mountpoint, UnsafeRawBufferPointer(rebasing: bytes[(second + 1)...]))
        reply(client, code, message)
    }

    /// Seconds a request may take to arrive whole.
    static let requestTimeout = 2.0

    /// Refused uids: one line per uid a minute, so another user cannot fill the mount's log by
    /// connecting in a loop.
    private let refusals = Mutex(LogRateLimit())

    private func reply(_ client: Int32, _ code: ExitCode, _ message: String) {
        let line = Array("\(code.rawValue)\t\(message.replacingOccurrences(of: "\n", with: " "))\n".utf8)
        _ = line.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}
