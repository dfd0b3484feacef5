import CFuse
import Glibc
import MAMSystem
import Synchronization

/// Where a node was last seen: its parent's entry and its name there (the kernel's bytes with
/// the terminating NUL; names need not be UTF-8).
struct NodeName {
    let parent: Inode
    let name: [CChar]

    func names(_ other: Inode, _ otherName: UnsafePointer<CChar>) -> Bool {
        parent === other && name.withUnsafeBufferPointer { $0.baseAddress.map { strcmp($0, otherName) == 0 } ?? false }
    }
}

/// Bounds the O_PATH descriptors the daemon keeps for nodes the kernel has cached.
///
/// Every entry of the inode table may hold an O_PATH descriptor of its backing object. Only
/// `budget` of them are kept while idle (least recently used closed first); an entry whose
/// descriptor was closed opens it again through its recorded (parent, name) with
/// openat(O_PATH|O_NOFOLLOW) and accepts the result only when (st_dev, st_ino) match
/// (else ESTALE). Never closed while idle: the root (no name), entries with open handles,
/// entries whose last known name was removed (nothing to find them by again), and descriptors
/// a request is using (see `withPins`).
///
/// A descriptor read through `descriptor(of:)` stays open until the `withPins` around the
/// first read of it on that thread returns: every FUSE request that uses node descriptors runs
/// inside one (LowLevelOperations), as does queued provider work. Read outside any (only the
/// error log of read/write/fallocate/lseek does), it is merely made the most recently used.
final class DescriptorCache: @unchecked Sendable {
    /// Idle descriptors kept at most.
    let budget: Int
    /// The idle set and counters; also guards every entry's `slot`.
    private let ledger: Mutex<Ledger>

    init(budget: Int) {
        self.budget = max(budget, 1)
        ledger = Mutex(Ledger(budget: self.budget))
    }

    /// A quarter of the soft RLIMIT_NOFILE (the rest is left to open handles, directory
    /// listings, the state database and libfuse), between 16 and 8192.
    static func defaultBudget() -> Int {
        var limit = rlimit()
        guard getrlimit(SystemConstants.resourceOpenFiles, &limit) == 0 else { return 256 }
        return budget(softLimit: UInt64(limit.rlim_cur))
    }

    /// `defaultBudget()` under a soft open-file limit of `softLimit` (RLIM_INFINITY, the largest
    /// value, is clamped like any large limit).
    static func budget(softLimit: UInt64) -> Int {
        Int(min(max(softLimit / 4, 16), 8192))
    }

    /// Node descriptors open now (idle and in use).
    var heldCount: Int { ledger.withLock { $0.held } }

    // MARK: Per-thread pins

    /// The descriptors read on this thread while `body` runs stay open until it returns (those
    /// an enclosing `withPins` read first stay open until that one returns). Loops that touch
    /// many entries in one request run each step in its own, so a request never holds more
    /// than a few descriptors.
    static func withPins<R>(_ body: () throws -> R) rethrows -> R {
        let scope = PinScope.current()
        scope.enter()
        defer { scope.leave() }
        return try body()
    }

    // MARK: Descriptors

    /// The O_PATH descriptor of `inode`, opened again through its recorded name if it was closed.
    /// - Throws: `FilesystemError` ESTALE when the name is gone or names another object now;
    ///   the errno of openat otherwise (EMFILE, EACCES).
    func descriptor(of inode: Inode) throws -> Int32 {
        let scope = PinScope.active()
        let (open, record) = ledger.withLock { ledger -> (Int32, NodeName?) in
            guard inode.slot.fd >= 0 else { return (-1, inode.slot.record) }
            ledger.pin(inode, scope)
            return (inode.slot.fd, nil)
        }
        if open >= 0 { return open }
        guard let record else { throw FilesystemError(code: ESTALE) }
        let parentFD = try descriptor(of: record.parent)
        let found: FileDescriptor
        do {
            // The recorded name's bytes, NUL-terminated, as the openat argument.
            found = try FileDescriptor.openPath(in: parentFD, record.name, flags: O_NOFOLLOW)
        } catch {
            throw FilesystemError(code: error == .noSuchFile || error == .notDirectory ? ESTALE : error.rawValue)
        }
        guard let st = try? found.stat(), BackingKey(st) == inode.key else { throw FilesystemError(code: ESTALE) }
        return adopt(found.take(), for: inode, scope: scope)
    }

    /// The descriptor of `inode` when it is open now (pinned like `descriptor(of:)`), else nil;
    /// never opens one.
    func openDescriptor(of inode: Inode) -> Int32? {
        let scope = PinScope.active()
        return ledger.withLock { ledger in
            guard inode.slot.fd >= 0 else { return nil }
            ledger.pin(inode, scope)
            return inode.slot.fd
        }
    }

    /// Gives `inode` the descriptor `fd` of its backing object unless it holds one already (then
    /// `fd` is closed); returns the descriptor the entry holds, pinned for the caller.
    @discardableResult
    func adopt(_ fd: Int32, for inode: Inode, scope: PinScope? = PinScope.active()) -> Int32 {
        var result: Int32 = -1
        locked { ledger in
            if inode.slot.fd >= 0 {
                ledger.closing.append(fd)
            } else {
                inode.slot.fd = fd
                ledger.held += 1
            }
            ledger.pin(inode, scope)
            result = inode.slot.fd
        }
        return result
    }

    /// Points `inode` at a new descriptor (its backing object was replaced). The old one may
    /// still be in use by another request (read inside its pin scope), so it is closed as soon
    /// as no request has the entry pinned: at once when none has, else by the last `unpin`.
    func replace(_ inode: Inode, with fd: Int32) {
        let scope = PinScope.active()
        locked { ledger in
            let old = inode.slot.fd
            inode.slot.fd = fd
            if old < 0 {
                ledger.held += 1
            } else if inode.slot.pins == 0 {
                ledger.closing.append(old)
            } else {
                inode.slot.retired.append(old)
            }
            ledger.pin(inode, scope)
        }
    }

    /// The name `inode` was last known by (lookup, create, link, rename), unless that name was
    /// removed since.
    func recordedName(of inode: Inode) -> NodeName? {
        ledger.withLock { _ in inode.slot.nameLost ? nil : inode.slot.record }
    }

    /// Opens `inode`'s object again by a name it still has and makes that its descriptor
    /// (pinned like `descriptor(of:)`): for an entry whose descriptor was opened by a name that
    /// is gone while another link remains. Tries the recorded name (the last one the kernel
    /// found it by), then the other names of the recorded name's directory (hard links usually
    /// share one; a lookup of one link and the removal of that link leave no record). Each
    /// candidate is opened with O_PATH|O_NOFOLLOW and taken only when its (st_dev, st_ino) is
    /// the entry's. Nil when none is found.
    func reopenByAnotherName(_ inode: Inode) -> Int32? {
        let (record, lost) = ledger.withLock { _ in (inode.slot.record, inode.slot.nameLost) }
        guard let record, let parentFD = try? descriptor(of: record.parent) else { return nil }
        func take(_ name: UnsafePointer<CChar>) -> Int32? {
            guard let found = try? FileDescriptor.openPath(in: parentFD, name, flags: O_NOFOLLOW),
                  let st = try? found.stat(), BackingKey(st) == inode.key else { return nil }
            let fd = found.take()
            replace(inode, with: fd)
            setName(inode, parent: record.parent, name: name)
            return fd
        }
        if !lost, let fd = record.name.withUnsafeBufferPointer({ take($0.baseAddress!) }) { return fd }
        guard let directory = try? FileDescriptor.open(in: parentFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
              var names = try? DirectoryIterator(adopting: directory) else { return nil }
        while let entry = try? names.next() {
            guard entry.inode == inode.key.inode else { continue }
            let name = entry.name.map { CChar(bitPattern: $0) } + [0]
            if let fd = name.withUnsafeBufferPointer({ take($0.baseAddress!) }) { return fd }
        }
        return nil
    }

    // MARK: Names

    /// `inode` is now known as `name` in `parent` (lookup, create, link, rename).
    func setName(_ inode: Inode, parent: Inode, name: UnsafePointer<CChar>) {
        let record = NodeName(parent: parent, name: Array(UnsafeBufferPointer(start: name, count: strlen(name) + 1)))
        locked { ledger in
            inode.slot.record = record
            inode.slot.nameLost = false
            ledger.makeIdleIfUnused(inode)
        }
    }

    /// `name` in `parent` was removed (unlink, rmdir, replaced by a rename): an entry last known
    /// by it keeps its descriptor from now on (it could not be found again).
    func nameRemoved(_ inode: Inode, parent: Inode, name: UnsafePointer<CChar>) {
        ledger.withLock { ledger in
            guard let record = inode.slot.record, record.names(parent, name) else { return }
            inode.slot.nameLost = true
            if ledger.idle.removeValue(forKey: ObjectIdentifier(inode)) != nil { inode.slot.isIdle = false }
        }
    }

    // MARK: Lifecycle

    /// The kernel forgot `inode`: its descriptor is closed now, or when the last request using
    /// it is done.
    func drop(_ inode: Inode) {
        let fd: [Int32]? = ledger.withLock { ledger in
            inode.slot.forgotten = true
            if ledger.idle.removeValue(forKey: ObjectIdentifier(inode)) != nil { inode.slot.isIdle = false }
            guard inode.slot.pins == 0 else { return nil }
            let retired = inode.slot.retired
            inode.slot.retired.removeAll()
            return retired + (ledger.takeDescriptor(inode).map { [$0] } ?? [])
        }
        for descriptor in fd ?? [] { SystemCall.close(descriptor) }
    }

    /// The last handle of `inode` was released: its descriptor may be closed again when idle.
    func handlesClosed(_ inode: Inode) {
        locked { $0.makeIdleIfUnused(inode) }
    }

    /// The entry is being deinitialized: its descriptor (if any) is closed by the caller.
    func entryGone(holding fd: Int32) {
        if fd >= 0 { ledger.withLock { $0.held -= 1 } }
    }

    fileprivate func unpin(_ inode: Inode) {
        locked { ledger in
            inode.slot.pins -= 1
            guard inode.slot.pins == 0 else { return }
            ledger.closing.append(contentsOf: inode.slot.retired)
            inode.slot.retired.removeAll()
            if inode.slot.forgotten, let fd = ledger.takeDescriptor(inode) {
                ledger.closing.append(fd)
            } else {
                ledger.makeIdleIfUnused(inode)
            }
        }
    }

    /// Runs `body` under the mutex, then closes what it queued in `closing` and what the budget
    /// evicts, after the mutex is released.
    private func locked(_ body: (inout Ledger) -> Void) {
        let victims: [Int32] = ledger.withLock { ledger in
            body(&ledger)
            let queued = ledger.closing
            ledger.closing.removeAll()
            return queued + ledger.evictIfOverBudget()
        }
        for fd in victims { SystemCall.close(fd) }
    }
}

/// What `DescriptorCache` keeps under its mutex: the idle entries (least recently used
/// closed first) and the counters. Every entry's `slot` is changed only while it is held.
private struct Ledger {
    let budget: Int
    var idle: [ObjectIdentifier: Inode] = [:]
    var clock: UInt64 = 0
    var held = 0
    /// Descriptors to close once the mutex is released (see `DescriptorCache.locked`).
    var closing: [Int32] = []

    init(budget: Int) { self.budget = budget }


    mutating func pin(_ inode: Inode, _ scope: PinScope?) {
        guard let scope else {
            // Outside any scope (an error log line's path): the most recently used, not pinned.
            makeIdleIfUnused(inode)
            return
        }
        if scope.add(inode) {
            inode.slot.pins += 1
            if idle.removeValue(forKey: ObjectIdentifier(inode)) != nil { inode.slot.isIdle = false }
        }
    }

    mutating func makeIdleIfUnused(_ inode: Inode) {
        clock += 1
        inode.slot.lastUse = clock
        guard inode.slot.pins == 0, inode.slot.fd >= 0, inode.slot.record != nil, !inode.slot.nameLost,
              !inode.slot.forgotten, !inode.slot.isIdle, inode.openCount == 0 else { return }
        inode.slot.isIdle = true
        idle[ObjectIdentifier(inode)] = inode
    }

    mutating func takeDescriptor(_ inode: Inode) -> Int32? {
        guard inode.slot.fd >= 0 else { return nil }
        let fd = inode.slot.fd
        inode.slot.fd = -1
        held -= 1
        return fd
    }

    /// Closes the least recently used idle descriptors, down to 7/8 of the budget, once the
    /// idle ones exceed it. Entries with open handles are taken out of the idle set (they come
    /// back when their last handle is released).
    mutating func evictIfOverBudget() -> [Int32] {
        guard idle.count > budget else { return [] }
        let target = budget - budget / 8
        var victims: [Int32] = []
        for inode in idle.values.sorted(by: { $0.slot.lastUse < $1.slot.lastUse }) {
            if idle.count <= target { break }
            idle[ObjectIdentifier(inode)] = nil
            inode.slot.isIdle = false
            guard inode.openCount == 0 else { continue }
            if let fd = takeDescriptor(inode) { victims.append(fd) }
        }
        return victims
    }
}

/// The descriptor state of one entry; guarded by its `DescriptorCache`'s mutex.
struct DescriptorSlot {
    var fd: Int32
    var record: NodeName?
    /// Request scopes using the descriptor now.
    var pins = 0
    var lastUse: UInt64 = 0
    var isIdle = false
    var nameLost = false
    var forgotten = false
    /// Descriptors of objects the entry no longer names (see `replace`), closed once unpinned.
    var retired: [Int32] = []
}

/// The entries a thread pinned in its nested `DescriptorCache.withPins` calls (one object per
/// thread; one level per call).
final class PinScope {
    private var levels: [[Inode]] = []
    /// The entries all levels hold.
    private var pinnedCount = 0
    /// Their identities, made once more than `linearLimit` are pinned and kept until the
    /// outermost level is left (a loop pinning one entry per step does not build it each
    /// step): a request pins one to three entries, many times over (every descriptor read
    /// asks), and comparing that many references costs less than hashing one.
    private var pinnedSet: Set<ObjectIdentifier>?
    static let linearLimit = 16

    func enter() { levels.append([]) }

    /// Unpins what the innermost level pinned.
    func leave() {
        guard let inodes = levels.popLast() else { return }
        pinnedCount -= inodes.count
        for inode in inodes {
            pinnedSet?.remove(ObjectIdentifier(inode))
            inode.descriptors.unpin(inode)
        }
        if levels.isEmpty { pinnedSet = nil }
    }

    /// Records `inode` in the innermost level; true when no level had pinned it yet.
    func add(_ inode: Inode) -> Bool {
        guard !levels.isEmpty else { return false }
        if pinnedSet != nil {
            guard pinnedSet!.insert(ObjectIdentifier(inode)).inserted else { return false }
        } else {
            for level in levels.indices {
                for other in levels[level] where other === inode { return false }
            }
            if pinnedCount >= PinScope.linearLimit {
                var set = Set(levels.joined().map { ObjectIdentifier($0) })
                set.insert(ObjectIdentifier(inode))
                pinnedSet = set
            }
        }
        levels[levels.count - 1].append(inode)
        pinnedCount += 1
        return true
    }

    /// How many entries the thread's levels hold (tests).
    var count: Int { pinnedCount }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<PinScope>.fromOpaque(pointer).release() }
        }
        return key
    }()

    /// This thread's scope object (made on first use).
    static func current() -> PinScope {
        if let pointer = pthread_getspecific(key) { return Unmanaged<PinScope>.fromOpaque(pointer).takeUnretainedValue() }
        let scope = PinScope()
        pthread_setspecific(key, Unmanaged.passRetained(scope).toOpaque())
        return scope
    }

    /// This thread's scope while inside `withPins`, else nil.
    static func active() -> PinScope? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        let scope = Unmanaged<PinScope>.fromOpaque(pointer).takeUnretainedValue()
        return scope.levels.isEmpty ? nil : scope
    }
}
