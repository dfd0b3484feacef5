import Glibc

/// What `MountDaemon.run` reports to its caller while it mounts, so the command line can say
/// so at the right moment (the daemon itself has no terminal). Each is called at most once, in
/// the calling process; the defaults do nothing.
public struct MountEvents: Sendable {
    /// A mount that was started.
    public struct Started: Sendable, Equatable {
        /// The process that serves the mount (the forked daemon, or this process with `-f`).
        public let pid: pid_t
        /// The backing directory, absolute and resolved.
        public let backingDirectory: String
        /// The mountpoint, absolute and resolved.
        public let mountpoint: String
    }

    /// `--force` found a dead mount (its daemon had exited) on the mountpoint and removed it;
    /// called with the mountpoint as the kernel lists it, before anything is mounted.
    public var removedDeadMount: @Sendable (String) -> Void = { _ in }
    /// The request was checked and the mount is about to start (the resolved options: the
    /// account as its accountId, "" for unmanaged).
    public var prepared: @Sendable (MountOptions) -> Void = { _ in }
    /// The mount answers.
    public var started: @Sendable (Started) -> Void = { _ in }

    public init() {}
}
