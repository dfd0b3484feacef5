import Glibc
import MAMProtection
import MAMFileProvider

/// What a mount kind adds to the overlay's requests: nothing for a plain overlay
/// (`PlainMountHooks`), a file provider's work for a `--remote/--provider` mount
/// (`NonReplicatedMountHooks`, `ReplicatedMountHooks`). The overlay calls in at these points
/// and never asks which kind it has:
///
/// | overlay request                         | hook                                                   |
/// |-----------------------------------------|--------------------------------------------------------|
/// | mount                                   | `initialPass` (bind the root, `createPlaceholders` / `syncOnce`), `start` |
/// | any name at the root                    | `isReservedRootName`: `.mamfs-provider` is hidden (ENOENT / EPERM / left out of listings) |
/// | a new name on a provider mount          | `ProviderNames.isTemporaryName`: a provider temp file's form is EPERM (`checkVisibleName`) |
/// | list/get/set/removexattr                | `isReservedAttribute`: `user.mam.fp.*` hidden on every kind (not listed, ENODATA, EPERM) |
/// | getattr / lookup / readdirplus of an empty file without header | `placeholderSize`: the remote size |
/// | open / truncate by path                 | `materializeIfPlaceholder`: `startProvidingItem`, then the entry is repointed |
/// | release of a writable handle, fsync, truncate by path | `fileChanged` (non-replicated: `itemChanged`, queued; fsync waits) |
/// | unlink / rmdir                          | `removing`: the local removal runs inside it, once   |
/// | rename                                  | `renaming`: the local rename runs inside it, once    |
/// | mkdir, link                             | `made`: after the object was made                      |
/// | every `--sync-interval` (`RemoteChangeTimer`) | replicated: `syncOnce` (also soon after a local change); non-replicated: pending uploads, then `createPlaceholders` (remote changes, renames, deletes), on the queue |
/// | unmount                                 | `stop`                                                 |
///
/// Non-replicated remote work runs on one serial queue, in request order, after the kernel's
/// request is done locally (a program's close/rm/mv does not wait for the remote). Every
/// deferred call finds its file by identity (the entry's descriptor for a close, an O_PATH
/// descriptor taken before a rename), never by the path it had when queued, so a close followed
/// at once by a rename (write temp, rename over: the usual editor save) uploads under the final
/// name. The local rename/unlink/rmdir runs on the queue too (after uploads queued before it),
/// so the attributes it reads are those the earlier uploads wrote. fsync returns once its upload
/// is done; unmount waits for the queue. Open of a placeholder waits too: it needs the contents.
///
/// A file created in the mount is imported by its first `itemChanged` (the importDocument rule:
/// a protected file is decrypted to a copy and only the plain copy is uploaded, after the domain
/// account's `canReceiveSharedFile`). A refusal or an upload error keeps the local file as it
/// is and logs one line (`-o log=FILE`); the close or fsync itself does not fail, because the
/// data is safe locally. Failed uploads are retried at the next close/fsync/rename of the file,
/// `mamfs provider sync` or mount (non-replicated) or pass (replicated).
protocol MountHooks: AnyObject, Sendable {
    /// The first pass, before the mount appears; `afterPass` is called after later passes that
    /// changed the local tree (entries whose file was replaced are superseded: the kernel looks their names up again).
    func initialPass(afterPass: @escaping @Sendable () -> Void)

    /// Starts background work (a replicated mount's passes).
    func start()

    /// Stops background work and finishes queued remote work.
    func stop()

    /// True for a name at the mount's root that is not part of the tree programs see (the
    /// kernel's bytes).
    func isReservedRootName(_ name: UnsafePointer<CChar>) -> Bool

    /// True for an extended attribute name the mount keeps to itself (the kernel's bytes, NUL
    /// terminated or as a listxattr slice).
    func isReservedAttribute(_ name: UnsafeRawBufferPointer) -> Bool

    /// The size to report for an empty regular file without a header (a placeholder's remote
    /// size), nil for a real empty file. `path` is the backing path (evaluated only if needed;
    /// its error is thrown).
    func placeholderSize(path: () throws -> String) throws -> Int64?

    /// Before open or truncate by path: replaces a placeholder by the remote contents.
    /// - Throws: `MAMError` (remote unreachable, deleted remotely, account wiped).
    func materializeIfPlaceholder(_ inode: Inode, in fs: OverlayFilesystem) throws

    /// A file written through the mount was closed, fsynced (`wait`: return once handled) or
    /// truncated by path.
    func fileChanged(_ inode: Inode, in fs: OverlayFilesystem, wait: Bool)

    /// Runs `remove` (the one local unlinkat of `name` in `dir`) with the remote side around it.
    func removing(_ name: UnsafePointer<CChar>, in dir: Inode, directory: Bool, fs: OverlayFilesystem,
                  remove: () throws -> Void) throws

    /// Runs `rename` (the one local rename) with the remote side around it.
    func renaming(_ move: RenameRequest, fs: OverlayFilesystem, rename: () throws -> Void) throws

    /// A directory (mkdir) or a hard link (link) was made through the mount.
    func made(_ made: MadeEntry, kind: MadeKind, fs: OverlayFilesystem)
}

/// What `MountHooks.made` reports.
enum MadeKind: Sendable {
    case directory
    case hardLink
}

/// A rename as the hooks see it: source and target directory entries and whether the two
/// names are exchanged (RENAME_EXCHANGE).
struct RenameRequest {
    let from: Inode
    let name: UnsafePointer<CChar>
    let to: Inode
    let newName: UnsafePointer<CChar>
    let exchange: Bool
}

/// The names a provider mount hides, compared as bytes.
enum ProviderNames {
    static let metadataName: [CChar] = Array(ProviderLayout.metadataDirectoryName.utf8CString)
    private static let attributePrefix = Array("user.mam.fp.".utf8)

    /// True for `.mamfs-provider`.
    static func isMetadataName(_ name: UnsafePointer<CChar>) -> Bool {
        strcmp(name, metadataName) == 0
    }

    /// True for a name of the form the providers' temp files have (`.NAME.mamfs-tmp-XXXXXX`),
    /// which both providers skip, other than the temp names of mamfs' own rewrites through
    /// a mount (`.NAME.mamfs-tmp-pPID-SUFFIX`, `WriterTemporaryName`), which are renamed away.
    static func isTemporaryName(_ name: UnsafePointer<CChar>) -> Bool {
        guard name.pointee == 0x2E else { return false }
        let text = String(cString: name)
        return ProviderLayout.isTemporaryName(text) && WriterTemporaryName.writer(of: text) == nil
    }

    /// True for the provider's own extended attributes (`user.mam.fp.*`).
    static func isProviderAttribute(_ name: UnsafeRawBufferPointer) -> Bool {
        name.count >= attributePrefix.count && name.prefix(attributePrefix.count).elementsEqual(attributePrefix)
    }
}

extension OverlayFilesystem {
    /// The hooks of a mount with `options`: plain, or the provider's binding of `rootPath`;
    /// the provider's lines go to `daemonLog`.
    /// - Throws: `MAMError` from binding the provider (see `NonReplicatedProvider`,
    ///   `ReplicatedProvider`).
    static func makeHooks(options: MountOptions, rootPath: String, context: ProtectionContext,
                          log daemonLog: DaemonLog) throws -> any MountHooks {
        guard let kind = options.provider, let remote = options.remote else { return PlainMountHooks() }
        let log: @Sendable (String) -> Void = { daemonLog.write($0) }
        let binding = try BoundProvider(kind: kind, rootPath: rootPath, remote: remote, access: options.remoteAccess,
                                        account: options.account,
                                          context: context, log: log)
        switch binding {
        case .nonReplicated(let provider):
            return NonReplicatedMountHooks(provider: provider, schedule: RetrySchedule(base: options.retryBase),
                                           interval: options.syncInterval ?? MountOptions.defaultSyncInterval(kind), log: log)
        case .replicated(let provider):
            return ReplicatedMountHooks(provider: provider,
                                        interval: options.syncInterval ?? MountOptions.defaultSyncInterval(kind), log: log)
        }
    }
}
