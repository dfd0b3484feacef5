import Glibc
import MAMFileProvider
import MAMSystem

/// A local object found by identity: an O_PATH descriptor taken before a rename, so the
/// deferred remote work finds it under whatever name it has when the work runs.
final class LocalObject: @unchecked Sendable {
    private let descriptor: FileDescriptor
    /// Its item identifier when it was taken (nil: not an item then).
    let identifier: String?

    init?(directory: Int32, name: UnsafePointer<CChar>) {
        guard let opened = try? FileDescriptor.openPath(in: directory, name, flags: O_NOFOLLOW) else { return nil }
        identifier = (try? ExtendedAttributes(descriptorPath: opened.rawValue).string(LocalItemAttributes.itemAttribute)) ?? nil
        descriptor = opened
    }

    /// Its current path; nil when it was removed. A placeholder materialized since was
    /// replaced by a new file under the same name: that one is accepted when it carries
    /// `identifier`.
    func currentPath(expecting identifier: String?) -> String? {
        guard let (path, deleted) = try? ProcessDescriptorPath.currentPath(of: descriptor.rawValue), !path.isEmpty,
              let st = try? descriptor.stat() else { return nil }
        if st.st_nlink > 0 { return path }
        guard let identifier, deleted else { return nil }
        return LocalItemAttributes.read(path: path)?.identifier.rawValue == identifier ? path : nil
    }
}
