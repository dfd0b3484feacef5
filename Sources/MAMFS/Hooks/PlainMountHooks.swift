/// The hooks of a plain overlay: none. Every call returns at once, without a system call.
/// The file provider's attributes (`user.mam.fp.*`) are hidden here too: a plain mount of a
/// directory a provider mount also uses must neither show them nor let a program plant them
/// (a forged item identifier or upload stamp would steer that provider's next sync).
final class PlainMountHooks: MountHooks {
    func initialPass(afterPass: @escaping @Sendable () -> Void) {}
    func start() {}
    func stop() {}
    func isReservedRootName(_ name: UnsafePointer<CChar>) -> Bool { false }
    func isReservedAttribute(_ name: UnsafeRawBufferPointer) -> Bool { ProviderNames.isProviderAttribute(name) }
    func placeholderSize(path: () throws -> String) throws -> Int64? { nil }
    func materializeIfPlaceholder(_ inode: Inode, in fs: OverlayFilesystem) throws {}
    func fileChanged(_ inode: Inode, in fs: OverlayFilesystem, wait: Bool) {}

    func removing(_ name: UnsafePointer<CChar>, in dir: Inode, directory: Bool, fs: OverlayFilesystem,
                  remove: () throws -> Void) throws {
        try remove()
    }

    func renaming(_ move: RenameRequest, fs: OverlayFilesystem, rename: () throws -> Void) throws {
        try rename()
    }

    func made(_ made: MadeEntry, kind: MadeKind, fs: OverlayFilesystem) {}
}
