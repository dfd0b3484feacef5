import Glibc

/// The process a request comes from, as the core sees it: uid, gid and pid from the request,
/// the supplementary groups read only when a decision needs them (a /proc read per request
/// otherwise).
struct Caller {
    let uid: uid_t
    let gid: gid_t
    let pid: pid_t
    /// Reads the supplementary groups of `source` (a request token of the front end).
    private let readGroups: (OpaquePointer?) -> [gid_t]
    private let source: OpaquePointer?

    /// `readGroups(source)` answers the supplementary groups when asked.
    init(uid: uid_t, gid: gid_t, pid: pid_t, source: OpaquePointer? = nil,
         readGroups: @escaping (OpaquePointer?) -> [gid_t] = { _ in [] }) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.source = source
        self.readGroups = readGroups
    }

    /// Requests made by the mount itself (tests, internal work): root.
    static var daemon: Caller { Caller(uid: 0, gid: 0, pid: 0) }

    /// uid, gid and supplementary groups (read now).
    var credentials: CallerCredentials {
        CallerCredentials(uid: uid, gid: gid, groups: readGroups(source))
    }
}
