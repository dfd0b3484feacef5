/// When a handle's writes make a sequential run, which of its bytes to send to the disk early.
///
/// The kernel starts writing a dirty file back only at its dirty thresholds (10% of memory in
/// the background) or after 30 seconds, so a large copy into the mount followed by an fsync
/// (`cp` then `sync`, `dd conv=fsync`) used to encrypt everything first and only then wait
/// for the disk. With a run of writes each starting where the previous one ended, every
/// `window` bytes of the run the blocks up to where the current write begins are handed to
/// the disk while the rest is still being encrypted (`OverlayFilesystem.startWriteback`), so
/// the disk and the cipher work at once.
/// Random writes, rewrites of one place and files smaller than the window start nothing:
/// their pages are left to the kernel, which may never need to write short-lived ones.
///
/// Plaintext offsets, bytes. Not synchronised: the owner (`OpenFile`) changes it only under
/// its entry's exclusive content lock.
struct SequentialWriteback {
    /// How many bytes of a run gather before they are sent together (8 MiB).
    static let window: Int64 = 8 << 20

    /// Where the handle's last write ended (-1: no write yet).
    private(set) var end: Int64 = -1
    /// Where the run's bytes not yet sent begin.
    private(set) var sentUpTo: Int64 = 0

    /// Notes a write of `count` bytes at `offset` and returns the plaintext range to send now:
    /// everything of the run from the last send up to where this write began, once that is
    /// `window` bytes or more; nil otherwise. A write that does not start where the last
    /// one ended starts a new run.
    mutating func wrote(at offset: Int64, count: Int64) -> Range<Int64>? {
        guard count > 0 else { return nil }
        defer { end = offset + count }
        guard offset == end else {
            sentUpTo = offset
            return nil
        }
        guard offset - sentUpTo >= SequentialWriteback.window else { return nil }
        defer { sentUpTo = offset }
        return sentUpTo..<offset
    }
}
