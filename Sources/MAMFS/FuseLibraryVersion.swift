import CFuse

/// The libfuse the mount runs on, for `mamfs diagnose`.
public enum FuseLibraryVersion {
    /// libfuse's `fuse_pkgversion()` of the library linked in at run time, e.g. "3.14.0".
    public static var current: String { String(cString: fuse_pkgversion()) }
}
