import MAMProtection

/// A plaintext view of an open file made from its entry's cached header and key, kept in
/// the entry for the handle it was made for (`Inode.view(for:)`) so that the requests on the
/// handle do not make one each (`OverlayFilesystem.content`). Any change of the entry's
/// cached state drops it. A class: an entry without one pays a reference for it.
final class ContentView: @unchecked Sendable {
    /// `OpenFile.serial` of the handle it was made for.
    let handleSerial: UInt64
    /// The backing descriptor it reads and writes.
    let fd: Int32
    let content: ProtectedFileContent
    /// The header names an owner (a tagged file with a non-empty owner).
    let hasOwner: Bool
    /// The owner of a plain-tagged file with a non-empty owner; nil otherwise.
    let plainTaggedOwner: String?

    init(handleSerial: UInt64, content: ProtectedFileContent) {
        self.handleSerial = handleSerial
        self.fd = content.fd
        self.content = content
        let header = content.header
        hasOwner = !(header?.owner.isEmpty ?? true)
        plainTaggedOwner = header.flatMap { $0.isEncrypted || $0.owner.isEmpty ? nil : $0.owner }
    }
}
