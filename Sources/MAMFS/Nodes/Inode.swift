import Glibc
import MAMProtection
import MAMSystem
import Synchronization

/// One backing object known to the kernel (a FUSE nodeid). Hard links share one entry, so
/// they share the content lock and the cached header (gocryptfs' openfiletable, passthrough_hp's
/// Inode).
final class Inode: @unchecked Sendable {
    /// The FUSE node id (1 = root).
    let nodeid: UInt64
    /// S_IFMT bits of the backing object.
    let fileType: mode_t
    /// Shared for reads and attribute reads, exclusive for writes, truncation and header changes.
    let contentLock = ReadWriteLock()

    /// What the entry's own mutex guards.
    private struct State {
        var key: BackingKey
        /// Changed only under the exclusive content lock (reads need the shared one).
        var content: ContentState = .unknown {
            didSet {
                contentVersion &+= 1
                view = nil
            }
        }
        /// Bumped at every change of `content`.
        var contentVersion: UInt64 = 0
        /// The plaintext view last made from `content` for one handle; dropped with every
        /// change of `content`, so it never holds a key the state has let go.
        var view: ContentView?
        /// The backing file's header hint (`HeaderHint`) and the ctime it was read at: what
        /// attribute replies use while `content` is unknown. Kept, whatever the ctime, until
        /// the header is read next (`takeHint`): the kernel may hold a size from it.
        var hint: (summary: HeaderSummary, stamp: timespec)?
        var openCount = 0
        /// Set when the last link went away while no handle was open: the close in deinit
        /// frees the backing inode, and rmdir of `directory` waits for it (PendingEvictions).
        var evictionMark: (pending: PendingEvictions, directory: BackingKey)?
        /// Backing objects mamfs replaced with a copy of their plaintext (encrypted, or under a
        /// new owner) and no name left: handles still open on one of them move to the entry's
        /// current file (`OpenFile.follow`).
        var copyReplacements: Set<BackingKey> = []
        /// Set when another file replaced this entry's file under its name while handles were
        /// open on it: the entry stays with the old file, the name gets an entry of its own.
        var superseded = false
        /// Set when an unlink or a rename through the mount took the file's last name: it was
        /// removed, not replaced, whatever file a name it had leads to later.
        var unlinked = false
        /// The backing file's ctime when the mount last looked at it (an open, a request
        /// through a handle), and whether the mount changed the file's content since: a ctime
        /// that moved while this is false was moved by another program (`observe(ctime:)`).
        var seenCtime = timespec()
        var changedSinceSeen = false
        /// Rewrites behind the mount noticed while handles were open: a handle opened before
        /// the last one is stale (`OpenFile.rewritesAtOpen`).
        var rewrites: UInt64 = 0
    }
    private let state: Mutex<State>
    /// The bounded cache that holds (or re-opens) this entry's O_PATH descriptor.
    let descriptors: DescriptorCache
    /// Descriptor, recorded name and pins; guarded by `descriptors`' mutex.
    var slot: DescriptorSlot
    /// Kernel lookup count; guarded by the table's lock.
    var lookupCount: UInt64 = 0

    init(nodeid: UInt64, key: BackingKey, fileType: mode_t, descriptors: DescriptorCache) {
        self.nodeid = nodeid
        self.state = Mutex(State(key: key))
        self.descriptors = descriptors
        self.slot = DescriptorSlot(fd: -1)
        self.fileType = fileType
    }

    deinit {
        descriptors.entryGone(holding: slot.fd)
        if slot.fd >= 0 { SystemCall.close(slot.fd) }
        for fd in slot.retired { SystemCall.close(fd) }
        if let mark = state.withLock({ $0.evictionMark }) { mark.pending.remove(directory: mark.directory) }
    }

    /// Marks the entry as the last link of an unlinked file in `directory` (no effect while a
    /// handle is open or when marked already).
    func markAwaitingEviction(_ pending: PendingEvictions, directory: BackingKey) {
        state.withLock { state in
            guard state.evictionMark == nil, state.openCount == 0 else { return }
            state.evictionMark = (pending, directory)
            pending.add(directory: directory)
        }
    }

    var isRegular: Bool { fileType == S_IFREG }
    var isDirectory: Bool { fileType == S_IFDIR }
    var isSymlink: Bool { fileType == S_IFLNK }

    /// The O_PATH descriptor of the backing object, opened again by name if the cache closed
    /// it; valid until the request (`DescriptorCache.withPins`) ends. -1 when the object cannot
    /// be found again (then `procPath` names nothing and calls on it fail).
    var fd: Int32 { (try? descriptors.descriptor(of: self)) ?? -1 }

    /// `fd`, with the reason when there is none (ESTALE: the object is gone or was replaced).
    func descriptor() throws -> Int32 { try descriptors.descriptor(of: self) }

    var key: BackingKey { state.withLock { $0.key } }

    /// The descriptor's /proc/self/fd path: the backing object itself, usable with path-only calls.
    var procPath: String { ProcessDescriptorPath.path(of: fd) }

    /// Points the entry at another backing object (after protect replaced the file).
    func replaceBacking(key: BackingKey, fd: Int32) {
        state.withLock { $0.key = key }
        descriptors.replace(self, with: fd)
        invalidateCachedHeader()
    }

    /// Records that the entry's backing object `key` is being replaced by a copy of its
    /// plaintext, so its open handles follow the entry to the copy.
    func markReplacedByCopy(_ key: BackingKey) {
        state.withLock { _ = $0.copyReplacements.insert(key) }
    }

    /// Whether handles open on `key` follow the entry (see `markReplacedByCopy`).
    func isReplacedByCopy(_ key: BackingKey) -> Bool {
        state.withLock { $0.copyReplacements.contains(key) }
    }

    /// Records that the entry's name now leads to another file (see `State.superseded`);
    /// false when it was recorded before.
    func markSuperseded() -> Bool {
        state.withLock { state in
            defer { state.superseded = true }
            return !state.superseded
        }
    }

    /// Whether another file replaced this entry's file under its name while handles were open.
    var isSuperseded: Bool { state.withLock { $0.superseded } }

    /// Records that a call through the mount removed the file's last name (see `State.unlinked`).
    func markUnlinked() {
        state.withLock { $0.unlinked = true }
    }

    /// Whether a call through the mount removed the file's last name.
    var isUnlinked: Bool { state.withLock { $0.unlinked } }

    /// How the backing file's ctime moved since the mount last looked (`State.seenCtime`).
    enum CtimeMove {
        /// Not at all.
        case none
        /// The mount changed the file's content since: the move may be its own.
        case byMount
        /// Another program changed the file (or the mount changed its metadata).
        case behindMount
    }

    /// Compares `ctime`, just read from the backing file, with the one the mount last saw, and
    /// records it; `changing`: the request goes on to change the file's content. Returns the
    /// move and the rewrites noticed so far; nil when `file` is given and is not the entry's
    /// file (a handle left on a file its entry no longer names).
    func observe(ctime: timespec, changing: Bool, file: BackingKey? = nil) -> (move: CtimeMove, rewrites: UInt64)? {
        state.withLock { state in
            if let file, file != state.key { return nil }
            var move = CtimeMove.none
            if state.seenCtime.tv_sec != ctime.tv_sec || state.seenCtime.tv_nsec != ctime.tv_nsec {
                move = state.changedSinceSeen ? .byMount : .behindMount
                state.seenCtime = ctime
            }
            if changing || move != .none { state.changedSinceSeen = changing }
            return (move, state.rewrites)
        }
    }

    /// An open read the header at `ctime`: the mount has seen the file as it is then.
    /// `rewritten`: the header is not the cached one, so another program rewrote the file
    /// while handles were open (they are stale from now on).
    func sawHeader(at ctime: timespec, rewritten: Bool) {
        state.withLock { state in
            state.seenCtime = ctime
            state.changedSinceSeen = false
            if rewritten { state.rewrites &+= 1 }
        }
    }

    /// The mount changed the file's content and then read its ctime (nil: it could not, and
    /// the next move counts as the mount's).
    func sawOwnChange(ctime: timespec?) {
        state.withLock { state in
            guard let ctime else {
                state.changedSinceSeen = true
                return
            }
            state.seenCtime = ctime
            state.changedSinceSeen = false
        }
    }

    /// Counts a rewrite behind the mount noticed while handles were open.
    func noteRewrite() {
        state.withLock { $0.rewrites &+= 1 }
    }

    /// Rewrites behind the mount noticed so far.
    var rewrites: UInt64 { state.withLock { $0.rewrites } }

    /// Drops the cached header, key and hint (the backing file was rewritten in place).
    func invalidateCachedHeader() {
        state.withLock {
            $0.content = .unknown
            $0.hint = nil
        }
    }

    /// The header hint read when the backing file's ctime was `ctime`; nil when none was.
    func hint(ctime: timespec) -> HeaderSummary? {
        state.withLock { state in
            guard let hint = state.hint, hint.stamp.tv_sec == ctime.tv_sec, hint.stamp.tv_nsec == ctime.tv_nsec else { return nil }
            return hint.summary
        }
    }

    /// Records the header hint `summary`, read at ctime `stamp`.
    func storeHint(_ summary: HeaderSummary, stamp: timespec) {
        state.withLock { $0.hint = (summary, stamp) }
    }

    /// Forgets the hint an attribute reply last used, whatever ctime it was read at, and
    /// returns it (to check what the kernel was told against the header just read).
    func takeHint() -> HeaderSummary? {
        state.withLock { state in
            defer { state.hint = nil }
            return state.hint?.summary
        }
    }

    var openCount: Int { state.withLock { $0.openCount } }

    /// True once a header (or its absence) was read and not invalidated since.
    var hasCachedHeader: Bool { state.withLock { $0.content.isKnown } }

    func adjustOpenCount(_ delta: Int) {
        let now = state.withLock { state in
            state.openCount += delta
            return state.openCount
        }
        guard now == 0 else { return }
        descriptors.handlesClosed(self)
        // The cipher context kept for reads and writes goes with the last handle (a cached
        // key stays): an entry that is only looked up costs no OpenSSL context.
        if case .known(_, _, let key?, _) = contentState { key.forgetBlockCipher() }
    }

    /// The cached header and key as one consistent pair (call under the content lock).
    var contentState: ContentState { state.withLock { $0.content } }

    /// The cached state and its version (bumped at every change of it), read together.
    var versionedContentState: (state: ContentState, version: UInt64) { state.withLock { ($0.content, $0.contentVersion) } }

    /// The view made from the cached state for `handle` (its serial and current descriptor),
    /// when the state has not changed since; nil otherwise.
    func view(for handle: OpenFile) -> ContentView? {
        let fd = handle.fd
        return state.withLock { state in
            guard let view = state.view, view.handleSerial == handle.serial, view.fd == fd else { return nil }
            return view
        }
    }

    /// Whether the entry keeps a view (for any handle).
    var hasView: Bool { state.withLock { $0.view != nil } }

    /// `handle` goes (released, or its open abandoned): its open count is given back and the
    /// view made for it dropped, so an entry keeps a view only while its handle is open.
    func handleGone(_ handle: OpenFile) {
        state.withLock { state in
            if state.view?.handleSerial == handle.serial { state.view = nil }
        }
        adjustOpenCount(-1)
    }

    /// Keeps `view`, made from the cached state at `version`, unless the state changed since.
    func storeView(_ view: ContentView, madeAt version: UInt64) {
        state.withLock { state in
            if state.contentVersion == version { state.view = view }
        }
    }

    /// The cached state when its header can be trusted for a backing file with `ctime` (see
    /// `ContentState.isCurrent`), else `.unknown`.
    func currentContent(ctime: timespec?) -> ContentState {
        state.withLock { state in
            state.content.isCurrent(ctime: ctime, handlesOpen: state.openCount > 0) ? state.content : .unknown
        }
    }

    /// Records `header` as read at ctime `stamp` (the key stays if the header is unchanged).
    func storeHeader(_ header: ProtectedFileHeader?, stamp: timespec) {
        state.withLock { $0.content = $0.content.storing(header: header, stamp: stamp) }
    }

    /// Records a header together with the key it was written with, loaded in `generation`.
    func storeHeader(_ header: ProtectedFileHeader?, key: SymmetricKey?, generation: UInt64, stamp: timespec) {
        state.withLock { $0.content = .known(header: header, stamp: stamp, key: key, keyGeneration: generation) }
    }

    /// Replaces the cached header by `header`, the same file's header with the sparse flag set
    /// (same file id and file key, so the key and stamp stay); no effect when another file's
    /// header is cached.
    func storeSparseHeader(_ header: ProtectedFileHeader) {
        state.withLock { state in
            guard case .known(let old, let stamp, let key, let generation) = state.content,
                  let old, old.encryption?.fileId == header.encryption?.fileId else { return }
            state.content = .known(header: header, stamp: stamp, key: key, keyGeneration: generation)
        }
    }

    /// Records the file key of the known header, loaded in `generation`.
    func storeFileKey(_ key: SymmetricKey?, generation: UInt64) {
        state.withLock { $0.content = $0.content.storing(key: key, generation: generation) }
    }
}
