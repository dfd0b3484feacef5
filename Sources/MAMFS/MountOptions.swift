import MAMFileProvider
import MAMProtection

/// What `mamfs mount` was asked for.
///
/// Timeouts: the kernel caches attributes (`attributeTimeout`) and names (`entryTimeout`) for
/// this many seconds, default 1 s. Changes made through the mount are never stale (every reply
/// carries the new attributes); changes made directly in the backing directory by other
/// programs show up after at most these timeouts. Set them with `-o attr_timeout=S` and
/// `-o entry_timeout=S` (0 = always ask mamfs).
public struct MountOptions: Sendable, Equatable {
    /// The backing directory (holds the tagged and encrypted files).
    public var backingDirectory: String
    /// Where the plaintext view appears: an existing empty directory.
    public var mountpoint: String
    /// Owner of new files outside tagged directories: an accountId or UPN of a registered
    /// account, or "" for unmanaged.
    public var account: String
    /// Stay in the foreground (no daemon); the command returns when the mount goes away.
    public var foreground: Bool
    /// FUSE mount options as given with -o (each element may hold several, comma-separated):
    /// allow_other, ro, default_permissions, max_write=N, ... plus mamfs' own attr_timeout=S,
    /// entry_timeout=S, page_cache (see `pageCache`), log=FILE (see `logFile`), notify
    /// (see `notify`) and busy_poll=US (see `busyPoll`), which are not passed to libfuse.
    /// writeback_cache is refused (mamfs must see every write to keep O_APPEND and plaintext
    /// sizes right).
    public var fuseOptions: [String]
    /// Seconds the kernel may cache attributes (plaintext sizes included).
    public var attributeTimeout: Double
    /// Seconds the kernel may cache a name -> node lookup.
    public var entryTimeout: Double
    /// The state directory, for the log and for reopening the state in the daemon; nil when
    /// the context was opened from the default location.
    public var stateDirectory: String?
    /// Passphrase file when the state's master key is passphrase-derived (the daemon reopens
    /// the state after forking, as SQLite connections must not cross a fork).
    public var passphraseFile: String?
    /// `-o page_cache`: read-only handles use the kernel's page cache too. By default they are
    /// opened with FOPEN_DIRECT_IO, so every read returns exactly the bytes mamfs answers
    /// (writable handles always use the page cache, so read-write mmap keeps working).
    ///
    /// Trade-off. With `page_cache`, repeated reads of the same data are served from memory.
    /// But a reader racing a truncation can then see zeros: while a SETATTR is in flight the
    /// kernel marks the size unstable and keeps the old i_size, so a READ answered after mamfs
    /// truncated comes back short, the kernel zero-fills the page and copies old-size bytes of
    /// zeros to the reader (the regression test "truncate-and-rewrite racing a reader"). Direct
    /// I/O reads see either the old or the new content, never bytes that were not in the file.
    /// A read-only descriptor can be mapped MAP_SHARED either way: the session's transport asks
    /// for FUSE_DIRECT_IO_ALLOW_MMAP (Sources/CFuseTransport; kernels before 6.6 answer such a map ENODEV
    /// without `page_cache`).
    public var pageCache: Bool
    /// `-o log=FILE`: where the mount's diagnostics go (tampered blocks with their backing path,
    /// libfuse's own messages). The file is opened for appending (created 0600) before the
    /// session starts and becomes the daemon's stderr. Without it the daemon keeps the stderr
    /// `mamfs mount` was started with (so `2>>FILE` works too; with -f that is the terminal).
    /// Lines never hold key material.
    public var logFile: String?

    /// `--remote DIR|URL`: the remote directory, or the http(s) URL of the WebDAV collection,
    /// of a file-provider mount (nil = a plain overlay). Set together with `provider`.
    public var remote: String? = nil
    /// `--remote-credentials FILE` and `--remote-ca FILE` of a WebDAV remote (absolute paths).
    public var remoteAccess = RemoteAccess()
    /// `--provider non-replicated|replicated`: which file provider binds the backing
    /// directory as its local root (nil = a plain overlay).
    public var provider: ProviderKind? = nil
    /// `--sync-interval SECONDS`: how often a replicated mount runs a sync pass (it also runs
    /// one after a file written through the mount is closed), or a non-replicated one looks
    /// for remote changes (`provider sync`'s work: pending uploads, then the placeholders
    /// refreshed, remote renames and deletes followed). nil: `defaultSyncInterval(kind)`.
    public var syncInterval: Double? = nil

    /// The interval of a provider kind when `--sync-interval` is not given, in seconds: 5 for
    /// replicated, 30 for non-replicated.
    public static func defaultSyncInterval(_ kind: ProviderKind) -> Double {
        kind == .replicated ? 5 : 30
    }
    /// `-o retry_base=SECONDS`: a non-replicated mount's first wait before it retries a queued
    /// change that found the remote unreachable (doubling after each failure, at most 5 min).
    /// Default 1 s.
    public var retryBase: Double = 1
    /// `--location NAME`: the storage location a file-provider mount is as a whole (a save or
    /// open location name of the policy keys, e.g. OneDriveForBusiness); `.other` when not
    /// given. Ignored by a plain mount, whose files are where the policy's `locations`
    /// prefixes put their path in the mount (mountpoint + relative path).
    public var location: StorageLocation = .other
    /// `--force`: a dead mount on the mountpoint (its daemon exited; the mountpoint answers
    /// ENOTCONN) is removed first. A live mount there is refused as without it.
    public var force = false
    /// `-v`: the daemon also logs when it has mounted (with its pid) and when it was unmounted.
    public var verbose = false
    /// `-o notify`: each blocked access is also shown on the desktop
    /// (`org.freedesktop.Notifications.Notify` on the session bus, at most one per file every
    /// 5 s); a failed notification is logged and never delays or fails the request.
    public var notify = false
    /// `-o busy_poll=US`: microseconds (0-1000, default 0 = off) a worker polls /dev/fuse
    /// before it sleeps waiting for the next request, like the kernel's net.core.busy_poll.
    ///
    /// Trade-off. When the daemon runs on a CPU of its own that would otherwise go idle, waking
    /// it is most of a small request's round trip, and polling saves that wakeup: more random
    /// I/O operations per second and faster small writes, for more daemon CPU time (one worker
    /// polls between requests). When the daemon shares its CPU with the program it serves,
    /// polling takes time from that program. After 8 polls in a row that found nothing the
    /// daemon stops polling until a request comes within the budget of a worker beginning to
    /// wait (a poll would have caught it), so an idle or sparsely used mount costs nothing.
    /// Figures: docs/PERFORMANCE.md.
    public var busyPoll: UInt32 = 0

    public init(backingDirectory: String, mountpoint: String, account: String = "", foreground: Bool = false,
                fuseOptions: [String] = [], attributeTimeout: Double = 1, entryTimeout: Double = 1,
                stateDirectory: String? = nil, passphraseFile: String? = nil, pageCache: Bool = false,
                logFile: String? = nil) {
        self.backingDirectory = backingDirectory
        self.mountpoint = mountpoint
        self.account = account
        self.foreground = foreground
        self.fuseOptions = fuseOptions
        self.attributeTimeout = attributeTimeout
        self.entryTimeout = entryTimeout
        self.stateDirectory = stateDirectory
        self.passphraseFile = passphraseFile
        self.pageCache = pageCache
        self.logFile = logFile
    }
}
