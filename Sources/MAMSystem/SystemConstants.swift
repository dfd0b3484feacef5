import CSystem
import Glibc

/// Linux constants Swift does not import (glibc declares them only under _GNU_SOURCE, or as
/// macros), each with the value from the kernel's UAPI headers, taken once from CSystem.
public enum SystemConstants {
    /// `O_PATH`: open for fstat/*at/xattr-by-/proc use only; no read or write.
    public static let pathOnly: Int32 = mamfs_O_PATH
    /// `O_TMPFILE` (includes O_DIRECTORY): an unnamed file in the given directory.
    public static let temporaryFile: Int32 = mamfs_O_TMPFILE
    /// `AT_EMPTY_PATH`: an *at call acts on the descriptor itself when the name is "".
    public static let emptyPath: Int32 = mamfs_AT_EMPTY_PATH
    /// `UTIME_NOW` for a `timespec.tv_nsec` of utimensat/futimens: set to the current time.
    public static let utimeNow: Int = mamfs_UTIME_NOW
    /// `UTIME_OMIT` for a `timespec.tv_nsec` of utimensat/futimens: leave unchanged.
    public static let utimeOmit: Int = mamfs_UTIME_OMIT
    /// `O_DIRECT`: reads and writes bypass the page cache (aligned buffers, offsets, lengths).
    public static let directIO: Int32 = mamfs_O_DIRECT
    /// `O_NOATIME`: reads through the descriptor do not update the file's access time (only
    /// for the file's owner or a caller with CAP_FOWNER; open answers EPERM otherwise).
    public static let noAccessTime: Int32 = mamfs_O_NOATIME
    /// `SEEK_DATA` for lseek: the next offset holding data.
    public static let seekData: Int32 = mamfs_SEEK_DATA
    /// `SEEK_HOLE` for lseek: the next offset in a hole (or the end).
    public static let seekHole: Int32 = mamfs_SEEK_HOLE
    /// `RENAME_NOREPLACE` for renameat2: fail with EEXIST rather than replace.
    public static let renameNoReplace: UInt32 = mamfs_RENAME_NOREPLACE
    /// `RENAME_EXCHANGE` for renameat2: swap the two names atomically.
    public static let renameExchange: UInt32 = mamfs_RENAME_EXCHANGE
    /// `RENAME_WHITEOUT` for renameat2: leave a whiteout (character device 0:0) at the old name.
    public static let renameWhiteout: UInt32 = mamfs_RENAME_WHITEOUT
    /// `FALLOC_FL_KEEP_SIZE` for fallocate: reserve without changing the file size.
    public static let fallocateKeepSize: Int32 = mamfs_FALLOC_FL_KEEP_SIZE
    /// `FALLOC_FL_PUNCH_HOLE` for fallocate (with KEEP_SIZE): deallocate; the range reads as zeros.
    public static let fallocatePunchHole: Int32 = mamfs_FALLOC_FL_PUNCH_HOLE
    /// `FALLOC_FL_ZERO_RANGE` for fallocate: the range reads as zeros and stays allocated.
    public static let fallocateZeroRange: Int32 = mamfs_FALLOC_FL_ZERO_RANGE
    /// `RLIMIT_NOFILE` for getrlimit/setrlimit (imported by Swift as an enum case of another type).
    public static let resourceOpenFiles: Int32 = mamfs_RLIMIT_NOFILE
}
