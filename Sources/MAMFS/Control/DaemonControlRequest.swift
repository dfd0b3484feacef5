import MAMProtection

/// A request on a mount daemon's control channel (`DaemonControlServer`), as `mamfs lock` and
/// `mamfs unlock` send it: one line with the verb, one with the mountpoint as the kernel lists
/// it, then, for `unlock`, the passphrase's bytes up to the end of the stream (none for a
/// key-file state). The answer is one line, `CODE<TAB>MESSAGE`, CODE the decimal `ExitCode`.
///
/// The mountpoint line lets a daemon refuse a request meant for another mount: a daemon whose
/// mount is gone may still hold a /dev/fuse descriptor with the connection number the kernel
/// has given to a new mount, and so be found as one of the new mount's daemons.
public enum DaemonControlRequest: String, Sendable, CaseIterable {
    /// Lock now, as a session lock would (`fileProtectionLevel` complete, completeUnlessOpen).
    case lock
    /// Unlock: load the master key again and give the withheld accounts their keys back.
    case unlock

    /// The start of the abstract socket names of the daemon with `pid` (no file anywhere: the
    /// name lives in the network namespace and goes with the daemon). The daemon adds 16 random
    /// hex digits, so no other process can take its name before it binds; clients find the
    /// name among the daemon's own sockets (`DaemonControlSocket.find`).
    static func socketPrefix(daemon pid: Int32) -> String { "mamfs-control-\(pid)-" }

    /// A request is at most the verb line, the mountpoint line and a passphrase of at most 64 KiB.
    static let maximumLength = 64 * 1024 + 4096 + 64

    /// The start of the message of a daemon that does not serve the mountpoint asked for: the
    /// client goes on to the next daemon it found.
    static let otherMount = "not the daemon of "
}
