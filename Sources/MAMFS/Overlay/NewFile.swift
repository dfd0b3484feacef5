import MAMProtection
import MAMSystem

/// A file `createTagged` just made: its read-write descriptor, the header and key written to
/// it, and what removes it again.
struct NewFile: ~Copyable {
    let file: FileDescriptor
    let header: ProtectedFileHeader?
    let key: SymmetricKey?
    let made: MadeObject
}
