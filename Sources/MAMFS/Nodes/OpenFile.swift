import Glibc
import MAMProtection
import MAMSystem
import Synchronization

/// An open regular file: the backing descriptor (O_RDWR whenever the caller may write, so
/// blocks can be read back and merged) and whether the caller asked for O_APPEND (mamfs
/// appends at the plaintext end itself; the backing descriptor never has O_APPEND).
///
/// The descriptor normally stays the one opened. When mamfs itself replaced the entry's file
/// to encrypt it (a plain-tagged file whose owner now requires encryption), the handle moves
/// to the replacement (`follow`); the old descriptor is kept open until the handle goes, so a
/// request that read `fd` just before still has a valid descriptor.
final class OpenFile: KernelHandle, @unchecked Sendable {
    let inode: Inode
    let append: Bool
    let writable: Bool
    /// The descriptor opened and the backing object it is open on.
    private let openedFD: Int32
    private let openedKey: BackingKey
    /// Set once the handle followed a replacement (reads of `fd` stay lock-free until then).
    private let moved = Atomic<Bool>(false)
    /// The descriptor followed to, its backing object, and the descriptors given up.
    private let replacement = Mutex<(fd: Int32, key: BackingKey, retired: [Int32])?>(nil)
    /// The header last read from `fd` itself and its key (see `detachedContent`).
    private let detached = Mutex<(ProtectedFileHeader?, SymmetricKey?)?>(nil)
    /// For an owner at `completeUnlessOpen`: the file the handle was opened on (its owner and
    /// file id) and its file key, kept with the handle so it goes on working while the
    /// session lock withholds the account's keys; nil otherwise.
    let pin: Pin?
    /// The entry's count of rewrites behind the mount when the handle was opened
    /// (`Inode.rewrites`): once it moves on, the file is no longer the one the handle opened.
    let rewritesAtOpen: UInt64
    /// The handle's run of sequential writes and how much of it was sent to the disk; changed
    /// only under the entry's exclusive content lock (`OverlayFilesystem.write`).
    var sequentialWriteback = SequentialWriteback()
    /// Unique among the handles of this process, never reused (names the handle an entry's
    /// cached `ContentView` was made for).
    let serial = OpenFile.serials.add(1, ordering: .relaxed).newValue
    private static let serials = Atomic<UInt64>(0)

    /// The file a handle was opened on, and its file key (nil for a plain file).
    struct Pin: @unchecked Sendable {
        let owner: String
        let fileId: [UInt8]?
        let key: SymmetricKey?

        /// Whether `header` is still the pinned file's (the same owner and file id).
        func matches(_ header: ProtectedFileHeader?) -> Bool {
            guard let header else { return false }
            return header.owner == owner && header.encryption?.fileId == fileId
        }
    }

    /// `key`: the backing object `fd` is open on (the entry's file when it was opened; the
    /// entry may be moved to another file at any time after).
    init(inode: Inode, fd: Int32, key: BackingKey, append: Bool, writable: Bool, pin: Pin? = nil, rewrites: UInt64 = 0) {
        self.inode = inode
        self.rewritesAtOpen = rewrites
        self.append = append
        self.writable = writable
        self.openedFD = fd
        self.openedKey = key
        self.pin = pin
    }

    /// The pinned file key when `header` is the pinned file's.
    func pinnedKey(for header: ProtectedFileHeader?) -> SymmetricKey? {
        guard let pin, pin.matches(header) else { return nil }
        return pin.key
    }

    /// The backing descriptor.
    var fd: Int32 {
        guard moved.load(ordering: .acquiring) else { return openedFD }
        return replacement.withLock { $0?.fd ?? openedFD }
    }

    /// The backing object the descriptor is open on.
    var backingKey: BackingKey {
        guard moved.load(ordering: .acquiring) else { return openedKey }
        return replacement.withLock { $0?.key ?? openedKey }
    }

    /// Moves the handle to `fd` (open on `key`, with this handle's access mode); the
    /// descriptors it used before are closed when the handle goes.
    func follow(fd: Int32, key: BackingKey) {
        replacement.withLock { current in
            var retired = current?.retired ?? []
            if let current { retired.append(current.fd) }
            current = (fd, key, retired)
        }
        moved.store(true, ordering: .releasing)
    }

    /// The plaintext view from this descriptor's own header (its entry now names another file).
    /// The header is read again at every call: another entry may reach the same file (a hard
    /// link looked up since) and give it a header or truncate it; the key is unwrapped again
    /// only when the header changed.
    func detachedContent(_ keyFor: (ProtectedFileHeader) throws -> SymmetricKey?) throws -> ProtectedFileContent {
        let fd = self.fd
        let header = try ProtectedFileHeader.read(fd: fd)
        let key = try detached.withLock { detached throws -> SymmetricKey? in
            if let detached, detached.0 == header { return detached.1 }
            let key = try header.flatMap { try keyFor($0) }
            detached = (header, key)
            return key
        }
        return try ProtectedFileContent(fd: fd, header: header, fileKey: key)
    }

    deinit {
        SystemCall.close(openedFD)
        if let replacement = replacement.withLock({ $0 }) {
            SystemCall.close(replacement.fd)
            for fd in replacement.retired { SystemCall.close(fd) }
        }
    }
}
