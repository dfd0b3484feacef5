import CSQLite

/// The two copies of a WAL-mode database's wal-index header (bytes 0-95 of the wal-index,
/// the `-shm` file every connection maps; SQLite's "WAL-mode file format" document, section
/// "The WAL-Index Header"). Every commit, by any connection of any process, rewrites both
/// copies (`iChange` counts commits; the last frame, the salts and the checksums move with
/// them), and it is the header SQLite itself compares with the copy it saw last to notice
/// another connection's commit (`PRAGMA data_version` moves exactly then). So two equal
/// markers read at two moments mean no transaction was committed in between. A read that
/// races a commit sees bytes of both states, which differ from the marker before it.
public struct SQLiteCommitMarker: Equatable, Sendable {
    /// The wal-index header's `iVersion` (byte 0, native byte order).
    static let indexVersion: UInt32 = 3_007_000
    /// Bytes of the two header copies.
    static let headerBytes = 96
    /// The size SQLite's unix VFS maps the wal-index in (`xShmMap`'s page size).
    static let indexPageBytes: Int32 = 32_768

    /// Bytes 0-95 of the wal-index; the last 32 bytes stay zero.
    private var words = SIMD16<UInt64>()

    /// The marker in the wal-index at `index`; nil when its first copy is not an initialised
    /// version-3007000 header (a foreign or not yet built index).
    init?(walIndex index: UnsafeRawPointer) {
        withUnsafeMutableBytes(of: &words) { bytes in
            bytes.baseAddress!.copyMemory(from: index, byteCount: Self.headerBytes)
        }
        let first = withUnsafeBytes(of: words) { ($0.load(fromByteOffset: 0, as: UInt32.self), $0[12]) }
        // iVersion at byte 0, isInit at byte 12 of the first copy.
        guard first.0 == Self.indexVersion, first.1 == 1 else { return nil }
    }

    /// Region 0 of the wal-index as connection `db` maps it (its main database file's
    /// `xShmMap`, SQLite's public VFS interface): SQLite's own shared mapping of the `-shm`
    /// file, so reading it costs no system call and takes no lock. nil when the file's VFS
    /// has no shared memory or the region is not mapped yet (no read in WAL mode so far). The
    /// pointer stays valid while the connection is open and in WAL mode.
    static func walIndex(of db: OpaquePointer) -> UnsafeRawPointer? {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
              let file, let methods = file.pointee.pMethods, methods.pointee.iVersion >= 2,
              let map = methods.pointee.xShmMap else { return nil }
        var region: UnsafeMutableRawPointer?
        guard withUnsafeMutablePointer(to: &region, { map(file, 0, indexPageBytes, 0, $0) }) == SQLITE_OK else { return nil }
        return region.map { UnsafeRawPointer($0) }
    }
}
