import Glibc

/// An exclusive BSD lock (flock(2)) on a mountpoint directory, held by `mamfs mount` from its
/// check that nothing is mounted there until the mount answers (or fails). A second
/// `mamfs mount` of the same mountpoint started meanwhile waits for the lock and then finds the
/// first mount, which it refuses as "already mounted": without the lock both passed the check
/// and both mounted, one daemon stacked over the other.
///
/// Best effort and advisory: a mountpoint with a mount already on it (live or dead) is not
/// opened (a hung daemon would hang the open; the check refuses or clears that mount as
/// before), nor is one the caller may not read (EACCES): such a mount goes ahead unlocked.
/// The descriptor is close-on-exec, and the forked daemon closes every inherited descriptor,
/// so only the `mamfs mount` process holds the lock.
final class MountpointLock {
    private var fd: Int32

    /// Waits for the lock on the directory `mountpoint` names (following symlinks, as the mount
    /// does). Interrupted by a signal, or refused by the filesystem, it goes on without one.
    /// - Returns: nil when nothing was locked (see above).
    init?(_ mountpoint: String) {
        guard case .notMounted = MountpointState.find(mountpoint).state else { return nil }
        fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX) == 0 else {
            close(fd)
            return nil
        }
    }

    /// Lets the lock go (once; later calls do nothing).
    func release() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    deinit { release() }
}
