import Glibc

/// A setattr's changes, decoded from the request: nil / `.omit` = leave as is.
struct AttributeChanges {
    enum Time {
        case omit
        case now
        case set(timespec)
    }

    var uid: uid_t?
    var gid: gid_t?
    var mode: mode_t?
    /// The new plaintext size (bytes).
    var size: Int64?
    var accessTime: Time = .omit
    var modificationTime: Time = .omit

    var changesMetadata: Bool {
        if uid != nil || gid != nil || mode != nil { return true }
        if case .omit = accessTime, case .omit = modificationTime { return false }
        return true
    }
}
