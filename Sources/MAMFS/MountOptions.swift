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
    /// allow_other, ro, default_permissions, max_write=N, ... plus mamfs' own attr_timeout=S
    /// and entry_timeout=S. writeback_cache is refused (mamfs must see every write to keep
    /// O_APPEND and plaintext sizes right).
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

    public init(backingDirectory: String, mountpoint: String, account: String = "", foreground: Bool = false,
                fuseOptions: [String] = [], attributeTimeout: Double = 1, entryTimeout: Double = 1,
                stateDirectory: String? = nil, passphraseFile: String? = nil) {
        self.backingDirectory = backingDirectory
        self.mountpoint = mountpoint
        self.account = account
        self.foreground = foreground
        self.fuseOptions = fuseOptions
        self.attributeTimeout = attributeTimeout
        self.entryTimeout = entryTimeout
        self.stateDirectory = stateDirectory
        self.passphraseFile = passphraseFile
    }
}
