import CFuse
import Glibc

extension Caller {
    /// The caller of `req`: fuse_req_ctx for uid, gid and pid; the supplementary groups from
    /// fuse_req_getgroups (the caller's /proc status) when a decision asks for them. A request
    /// without a context is treated as user nobody; groups that cannot be read count as none
    /// (never more access than known).
    init(_ req: fuse_req_t?) {
        guard let ctx = fuse_req_ctx(req)?.pointee else {
            self.init(uid: 65534, gid: 65534, pid: 0)
            return
        }
        self.init(uid: ctx.uid, gid: ctx.gid, pid: ctx.pid, source: req, readGroups: Caller.groups)
    }

    /// The supplementary groups of the request `req`.
    private static func groups(_ req: OpaquePointer?) -> [gid_t] {
        var groups = [gid_t](repeating: 0, count: 64)
        var count = fuse_req_getgroups(req, Int32(groups.count), &groups)
        if count > Int32(groups.count) {
            groups = [gid_t](repeating: 0, count: Int(count))
            count = fuse_req_getgroups(req, Int32(groups.count), &groups)
        }
        let known = count > 0 ? Int(min(count, Int32(groups.count))) : 0
        return Array(groups[0..<known])
    }
}
