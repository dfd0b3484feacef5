import CFuse
import Glibc
import MAMFileProvider
import MAMProtection
import MAMSystem
import Synchronization

/// The overlay's core: every request of the mount, answered from the backing directory through
/// the protected-file format. One object per mount, shared by the session's worker threads.
///
/// The FUSE front end (`LowLevelOperations`) decodes a request, calls one function here and
/// sends the reply; these functions take typed inputs (node ids, the kernel's name bytes, a
/// `Caller`) and return typed results (`Entry`, `OpenFile`, byte counts, attributes) or throw
/// (`FilesystemError`, `MAMError`; `errnoCode` maps them). They are split by family:
/// +Names (lookup, attributes), +Files, +Directories, +DirectoryListing, +Xattrs,
/// +OwnerChange, +NodeNames; what a mount kind adds is behind `hooks` (`MountHooks`).
///
/// Offsets and sizes the kernel sees are plaintext; the backing files hold the header and, for
/// encrypted owners, the encrypted blocks (docs/FORMAT.md).
final class OverlayFilesystem: @unchecked Sendable {
    let context: ProtectionContext
    let options: MountOptions
    /// Absolute, symlink-free path of the backing directory.
    let rootPath: String
    let table: InodeTable
    /// The owner walk's answers per directory (nil when the backing filesystem does not
    /// notify every change: the walk then runs for every create).
    let ownerCache: InheritedOwnerCache?
    /// Connection options (max_write=...) parsed from -o, applied when the session starts.
    var connectionOptions: OpaquePointer?
    /// Whether the kernel writes an inode's dirty shared-map pages back at every close even
    /// once FLUSH is refused (FUSE protocol 7.36, Linux 5.17, and later; set when the session
    /// starts). Then FLUSH is answered ENOSYS and the kernel sends no more; before, it is
    /// answered with success, because there a refused FLUSH turns the write-back at close off.
    let closeWritesBackWithoutFlush = Atomic<Bool>(false)
    /// Drops the kernel's cached attributes of a nodeid (set by the mount daemon: a FUSE
    /// inode invalidation; nil in tests without a kernel).
    var attributesChanged: ((UInt64) -> Void)?
    /// Drops the kernel's cached pages of a nodeid, writing dirty ones back first (set by the
    /// mount daemon: a FUSE inode invalidation of the whole range; nil in tests without a kernel).
    var contentInvalidated: ((UInt64) -> Void)?
    /// Tells the kernel that the name (second argument) in the directory with the nodeid (first
    /// argument) no longer leads to the node it had, without waiting (set by the mount daemon:
    /// a FUSE entry invalidation sent from a thread of its own, `EntryInvalidator`; nil in
    /// tests without a kernel).
    var nameReplaced: ((UInt64, String) -> Void)?
    /// Waits up to the given seconds for the `nameReplaced` invalidations asked for so far.
    var nameInvalidationsSettle: ((Double) -> Void)?
    /// What the mount kind (plain, non-replicated or replicated provider) adds to requests.
    let hooks: any MountHooks

    /// What `refresh` last saw of the state database.
    struct RefreshState {
        var generation: UInt64 = 1
        var lastRefresh: UInt64 = 0
        var wipedOwners: Set<String> = []
    }
    let refreshState = Mutex(RefreshState())
    /// Held by the `refresh` that found the state changed until everything derived from it
    /// (`refreshState`, the enforcement flags, superseded entries) is current, so no request
    /// acts on the reloaded context with the old derived state (a wiped owner's file opened
    /// after `mamfs wipe` returned).
    let refreshUpdate = Mutex(())
    /// Called by `refresh` when the context has just reloaded, before anything derived from it
    /// is updated (tests hold a refresh there; nil otherwise).
    var stateReloaded: (() -> Void)?
    /// Whether any managed account's policy enables caller-aware rules (see `isEnforcing`).
    let enforcing = Atomic<Bool>(false)
    /// The session lock's effect on the mount's keys (`OverlayFilesystem+SessionLock`).
    let sessionLock = Mutex(SessionLockState())
    /// Held while a lock or an unlock changes `sessionLock` and the keys (one at a time).
    let lockTransitions = ReadWriteLock()
    /// Held (exclusively) by content changes that could make an untagged file tagged or act on
    /// a stale idea of whether it is: writes that may reach bytes 0 ..< 8, every change through
    /// a handle whose entry was repointed to another file, and the O_TRUNC that gives an
    /// untagged file its header. One backing file can be reached through two entries (a handle
    /// left on an older file of its entry, `ReplacedFileHandles.moveEntry`, and a later lookup
    /// of another name of that file), whose content locks do not exclude each other; this lock
    /// does. Taken after the entry's content lock.
    let untaggedPrefixLock = ReadWriteLock()
    /// Set while any account's keys are withheld (the fast path of every content check).
    let keysWithheld = Atomic<Bool>(false)
    /// Whether any managed account's policy sets a `fileProtectionLevel` other than none.
    let fileProtectionInUse = Atomic<Bool>(false)
    /// The executables of the processes that send requests (read only while enforcing).
    let callers = CallerProcesses()
    /// Per-account policy answers of the current state generation (caller-aware rules).
    let policyFacts = PolicyFacts()
    /// Set once a decision went to the audit log (flushed when the mount stops).
    let recordedAccess = Atomic<Bool>(false)
    let daemonUID = geteuid()
    /// The daemon's diagnostic lines, scrubbed of the state's scrub list.
    let daemonLog = DaemonLog()

    /// Entries per readdirplus reply whose headers are prefetched ahead (a 4 KiB reply holds
    /// about 24 entries with attributes).
    static let headerPrefetchWindow = 32

    /// Buffers for read replies, reused across requests.
    let buffers = BufferPool(capacity: 1 << 20)

    /// Shared by rename and link, exclusive for an owner change: nothing moves into or within
    /// the tree between the caller's permission check and the rewrite of what was checked.
    let namespaceLock = ReadWriteLock()

    /// The backing root for lookups by backing path made on a caller's behalf (+Confined):
    /// resolved below it without crossing a symlink.
    let confinedRoot: ConfinedDirectory

    /// Opens the backing root `rootPath` (absolute, symlink-free) and, for a provider mount,
    /// binds it and runs the provider's first pass.
    /// - Throws: `MAMError` when the root cannot be opened or the provider cannot be bound.
    init(context: ProtectionContext, options: MountOptions, rootPath: String) throws {
        self.context = context
        self.options = options
        self.rootPath = rootPath
        let root: FileDescriptor
        let st: stat
        do {
            root = try FileDescriptor.openPath(rootPath, flags: O_DIRECTORY)
        } catch {
            throw MAMError.system("open \(rootPath)", errno: error.rawValue)
        }
        do {
            st = try root.stat()
        } catch {
            throw MAMError.system("stat \(rootPath)", errno: error.rawValue)
        }
        ownerCache = InheritedOwnerCache(rootFD: root.rawValue, rootKey: BackingKey(st))
        table = InodeTable(rootFD: root.take(), rootStat: st)
        confinedRoot = try ConfinedDirectory(path: rootPath)
        daemonLog.update(from: context)
        hooks = try OverlayFilesystem.makeHooks(options: options, rootPath: rootPath, context: context, log: daemonLog)
        _ = context.refreshIfChanged()
        let wiped = OverlayFilesystem.loadWipedOwners(context)
        refreshState.withLock { $0.wipedOwners = wiped }
        enforcing.store(OverlayFilesystem.anyPolicyEnforces(context), ordering: .relaxed)
        fileProtectionInUse.store(OverlayFilesystem.anyFileProtectionLevel(context), ordering: .relaxed)
        hooks.initialPass(afterPass: { [weak self] in self?.supersedeReplacedEntries() })
    }

    // MARK: Lifecycle

    /// Starts the mount kind's background work (once the mount is up).
    func start() { hooks.start() }

    /// Stops it and finishes queued remote work (before unmount returns); writes the audit
    /// records still counted in a burst.
    func stop() {
        hooks.stop()
        if recordedAccess.load(ordering: .relaxed) { context.auditLog.flush() }
    }

    /// One diagnostic line (stderr, or the mount's -o log=FILE), scrubbed (`DaemonLog`).
    func log(_ message: String) { daemonLog.write(message) }
    /// `log` for a line a client can cause at will: one per `key` a minute (`LogRateLimit`).
    func log(_ message: String, limitedBy key: String) { daemonLog.write(message, limitedBy: key) }
}
