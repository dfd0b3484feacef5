/// The hooks of a plain overlay: none. Every call returns at once, without a system call.
final class PlainMountHooks: MountHooks {
    func initialPass(afterPass: @escaping @Sendable () -> Void) {}
    func start() {}
    func stop() {}
    func isReservedRootName(_ name: UnsafePointer<CChar>) -> Bool { false }
    func isReservedAttribute(_ name: UnsafeRawBufferPointer) -> Bool { false }
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
