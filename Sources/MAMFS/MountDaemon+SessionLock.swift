import CSystem
import Foundation
import Glibc
import MAMBus
import MAMProtection

/// The session lock on a mount (policy key `fileProtectionLevel`, docs/POLICY.md): the daemon
/// listens to logind and the screensaver (`SessionLockMonitor`) and to `mamfs lock|unlock`
/// (`DaemonControlServer`), and `sessionLock(_:mountpoint:passphrase:)` is the client side.
extension MountDaemon {
    /// What a running mount listens to for the session lock; `stop` ends both.
    final class SessionLockListeners: Sendable {
        let monitor: SessionLockMonitor
        let control: DaemonControlServer?

        init(monitor: SessionLockMonitor, control: DaemonControlServer?) {
            self.monitor = monitor
            self.control = control
        }

        func stop() {
            monitor.stop()
            control?.stop()
        }
    }

    /// Starts listening for locks and unlocks, and withholds the `untilFirstUserAuth` accounts'
    /// keys when the daemon runs in no logind session (a user's login is the first
    /// authentication since boot; a mount started outside one, by a system unit at boot, waits
    /// for an unlock). Before the mount answers, so no request is served with keys a lock
    /// should have taken.
    /// `mountpoint`: the mount's, as the kernel lists it; `serving`: false once the session
    /// has ended (requests are then refused as meant for another mount).
    static func startSessionLock(fs: OverlayFilesystem, options: MountOptions, mountpoint: String,
                                 serving: @escaping @Sendable () -> Bool) -> SessionLockListeners {
        let verbose = options.verbose
        let daemonLog = fs.daemonLog
        let monitor = SessionLockMonitor(
            environment: ProcessInfo.processInfo.environment,
            log: { daemonLog.write($0) },
            debug: { if verbose { daemonLog.write($0) } },
            onEvent: { [weak fs] event in
                guard let fs else { return }
                switch event {
                case .locked(let source):
                    fs.sessionLocked(source: source)
                case .unlocked(let source):
                    _ = try? fs.sessionUnlocked(source: source)
                }
            })
        monitor.start()
        if let session = monitor.logindSession {
            fs.untilFirstUnlockSatisfied(by: "logind session \(session)")
        } else {
            fs.withholdUntilFirstUnlock()
        }
        if verbose {
            let sources = monitor.sources
            fs.log(sources.isEmpty ? "session lock: no logind session and no screensaver to listen to (mamfs lock|unlock still work)"
                                   : "session lock: listening to \(sources.joined(separator: "; "))")
        }
        var control: DaemonControlServer?
        do {
            let server = try DaemonControlServer(handle: { [weak fs] request, target, passphrase in
                guard let fs, serving(), target == mountpoint else {
                    return (.unavailable, DaemonControlRequest.otherMount + target + " (this one served " + mountpoint + ")")
                }
                return answer(request, passphrase: passphrase, fs: fs)
            }, log: { daemonLog.write($0) })
            server.start()
            control = server
        } catch {
            fs.log("mamfs lock|unlock will not reach this mount: \(error)")
        }
        return SessionLockListeners(monitor: monitor, control: control)
    }

    /// The daemon's answer to a control request.
    private static func answer(_ request: DaemonControlRequest, passphrase: UnsafeRawBufferPointer,
                               fs: OverlayFilesystem) -> (ExitCode, String) {
        switch request {
        case .lock:
            fs.sessionLocked(source: "mamfs lock")
            let withheld = fs.withheldAccounts
            return (.ok, withheld.isEmpty ? "locked; no account's policy drops its keys on a lock"
                                          : "locked; keys withheld: \(withheld.sorted().joined(separator: ", "))")
        case .unlock:
            do {
                let restored = try fs.sessionUnlocked(source: "mamfs unlock", passphrase: passphrase)
                return (.ok, restored.isEmpty ? "unlocked; no keys were withheld"
                                              : "unlocked; keys restored: \(restored.sorted().joined(separator: ", "))")
            } catch let error as MAMError {
                return (error.exitCode, "\(error)")
            } catch {
                return (.software, "\(error)")
            }
        }
    }

    /// Sends `request` to the daemon of the mount at `mountpoint` and returns its message.
    /// - Parameter passphrase: the passphrase for `unlock` of a passphrase-protected state
    ///   (empty for a key-file state).
    /// - Throws: `MountFailure`: `.noInput` when nothing mamfs is mounted there; `.unavailable`
    ///   when its daemon has no control channel, or the socket's owner is not the mount's
    ///   daemon; the daemon's own code (`.noPerm` for a wrong passphrase or another user;
    ///   `.tempFail` when it stayed busy for 5 s).
    public static func sessionLock(_ request: DaemonControlRequest, mountpoint: String,
                                   passphrase: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) throws -> String {
        try sessionLock(request, mountpoint: mountpoint, passphrase: passphrase, retryBusy: 25)
    }

    private static func sessionLock(_ request: DaemonControlRequest, mountpoint: String, passphrase: UnsafeRawBufferPointer,
                                    retryBusy: Int) throws -> String {
        let (path, state) = MountpointState.find(mountpoint)
        guard !path.contains("\n") else {
            throw MountFailure(description: "a mountpoint with a newline in its name cannot be locked or unlocked", exitCode: .usage)
        }
        let daemons: [pid_t]
        switch state {
        case .notMounted:
            var st = stat()
            let isDirectory = stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
            throw MountFailure(description: isDirectory ? "not a mamfs mount (name the mount's top directory)" : "no such directory",
                               exitCode: .noInput)
        case .dead:
            throw MountFailure(description: "a dead mount (its daemon exited; remove it with 'mamfs unmount')", exitCode: .unavailable)
        case .live(_, let serving):
            daemons = serving
        }
        var lastError = "its daemon was not found (is it another user's mount?)"
        for pid in daemons {
            guard let name = DaemonControlSocket.find(daemon: pid) else {
                lastError = "the daemon (pid \(pid)) has no control socket (see the mount's log)"
                continue
            }
            let fd = mamfs_abstract_connect(name)
            guard fd >= 0 else {
                lastError = "the daemon (pid \(pid)) does not answer on its control channel: \(String(cString: strerror(errno)))"
                continue
            }
            defer { close(fd) }
            var peer = mamfs_peer_credentials()
            guard mamfs_peer_credentials(fd, &peer) == 0, peer.pid == pid else {
                throw MountFailure(description: "the control channel of pid \(pid) is held by another process (pid \(peer.pid)); nothing was sent",
                                   exitCode: .unavailable)
            }
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let line = Array("\(request.rawValue)\n\(path)\n".utf8)
            // A daemon that refuses the caller answers without reading the request: the send
            // may then fail (EPIPE) while its answer is already there to read.
            let sent = line.withUnsafeBytes({ sendAll(fd, $0) }) && (request != .unlock || sendAll(fd, passphrase))
            let sendError = errno
            shutdown(fd, Int32(SHUT_WR))
            let reply = String(decoding: readToEnd(fd), as: UTF8.self).trimmingCharacters(in: .newlines)
            let parts = reply.split(separator: "\t", maxSplits: 1)
            guard let first = parts.first, let raw = Int32(first), let code = ExitCode(rawValue: raw) else {
                let why = sent ? "gave no answer" : "did not take the request: \(String(cString: strerror(sendError)))"
                throw MountFailure(description: "the daemon (pid \(pid)) \(why)", exitCode: .unavailable)
            }
            let message = parts.count > 1 ? String(parts[1]) : ""
            if code == .unavailable, message.hasPrefix(DaemonControlRequest.otherMount) {
                lastError = "no daemon serving it answered (pid \(pid): \(message))"
                continue
            }
            if code == .tempFail, retryBusy > 0 {
                // Every answering thread is taken (slow clients): wait for one.
                usleep(200_000)
                return try sessionLock(request, mountpoint: mountpoint, passphrase: passphrase, retryBusy: retryBusy - 1)
            }
            guard code == .ok else { throw MountFailure(description: message, exitCode: code) }
            return message
        }
        throw MountFailure(description: lastError, exitCode: .unavailable)
    }

    private static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }
}
