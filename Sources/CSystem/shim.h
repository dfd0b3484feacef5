#ifndef MAMFS_CSYSTEM_SHIM_H
#define MAMFS_CSYSTEM_SHIM_H
/* Linux calls and constants that glibc declares only under _GNU_SOURCE, or as macros.
 * _GNU_SOURCE itself must not be defined here: it changes struct layouts in system headers
 * and clashes with the toolchain's Dispatch/Foundation modules. So the few declarations we
 * need are repeated, with the values from the kernel's uapi headers. */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <spawn.h>
#include <malloc.h>

extern int fallocate(int fd, int mode, off_t offset, off_t len);
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
extern int memfd_create(const char *name, unsigned int flags);
extern int mkostemp(char *template_path, int flags);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
extern int sched_getaffinity(pid_t pid, size_t cpusetsize, void *mask);

static inline int mamfs_fallocate(int fd, int mode, long long offset, long long length) {
    return fallocate(fd, mode, (off_t)offset, (off_t)length);
}
/* sync_file_range(2) with SYNC_FILE_RANGE_WRITE (2): starts the writeback of the dirty pages of
   `fd` in `offset ..< offset+length` without waiting for it. -1 with errno. */
extern int sync_file_range(int fd, __off64_t offset, __off64_t length, unsigned int flags);
static inline int mamfs_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (__off64_t)offset, (__off64_t)length, 2u /* SYNC_FILE_RANGE_WRITE */);
}
static inline int mamfs_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}
/* mallopt(M_ARENA_MAX, count): at most `count` malloc arenas from now on; 1 on success. */
static inline int mamfs_set_malloc_arena_max(int count) {
    return mallopt(M_ARENA_MAX, count);
}
static inline int mamfs_mkostemp(char *template_path) {
    return mkostemp(template_path, O_CLOEXEC);
}
/* The spawned child closes every descriptor from `from` up (glibc 2.34). */
static inline int mamfs_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
static inline int mamfs_memfd_create(const char *name) {
    return memfd_create(name, 1U /* MFD_CLOEXEC */);
}
/* CPUs in the calling thread's affinity mask (up to 1024), or -1 with errno. */
static inline int mamfs_allowed_cpus(void) {
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
    if (sched_getaffinity(0, sizeof(mask), mask) != 0) return -1;
    int count = 0;
    for (size_t i = 0; i < sizeof(mask) / sizeof(mask[0]); i++) count += __builtin_popcountl(mask[i]);
    return count;
}
static const int mamfs_FALLOC_FL_KEEP_SIZE = 0x01;
static const int mamfs_FALLOC_FL_PUNCH_HOLE = 0x02;
static const int mamfs_FALLOC_FL_ZERO_RANGE = 0x10;
static const int mamfs_O_PATH = 010000000;
static const int mamfs_AT_EMPTY_PATH = 0x1000;
/* O_TMPFILE is __O_TMPFILE | O_DIRECTORY; O_DIRECTORY differs between architectures. */
static const int mamfs_O_TMPFILE = 020000000 | O_DIRECTORY;
static const long mamfs_UTIME_NOW = ((1l << 30) - 1l);
static const long mamfs_UTIME_OMIT = ((1l << 30) - 2l);
static const unsigned int mamfs_RENAME_NOREPLACE = 1u << 0;
static const unsigned int mamfs_RENAME_EXCHANGE = 1u << 1;
static const unsigned int mamfs_RENAME_WHITEOUT = 1u << 2;
/* O_DIRECT differs between architectures (040000 on x86, 0200000 on arm and arm64). */
#if defined(__aarch64__) || defined(__arm__)
static const int mamfs_O_DIRECT = 0200000;
#else
static const int mamfs_O_DIRECT = 040000;
#endif
/* O_NOATIME (asm-generic and x86: 01000000): reads through the descriptor leave the access time. */
static const int mamfs_O_NOATIME = 01000000;
static const int mamfs_SEEK_DATA = 3;
static const int mamfs_SEEK_HOLE = 4;
static const int mamfs_RLIMIT_NOFILE = 7;

/* openat2(2) (Linux 5.6+) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: resolves `path` below
 * `dirfd` without crossing any symlink or leaving the directory. glibc has no wrapper, so the
 * syscall is made directly; -1 with errno ENOSYS on older kernels. */
#include <unistd.h>
#include <errno.h>
struct mamfs_open_how {
    unsigned long long flags;
    unsigned long long mode;
    unsigned long long resolve;
};
extern long syscall(long number, ...);
static inline int mamfs_openat2_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct mamfs_open_how how = { (unsigned long long)(unsigned int)flags,
                                  (flags & (O_CREAT | 020000000 /* O_TMPFILE */)) ? (unsigned long long)mode : 0ull,
                                  0x08ull /* RESOLVE_BENEATH */ | 0x04ull /* RESOLVE_NO_SYMLINKS */ };
    return (int)syscall(437 /* SYS_openat2 */, dirfd, path, &how, sizeof(how));
}

/* unshare(2) of the mount namespace (CLONE_NEWNS, which implies CLONE_FS): the calling thread
 * alone moves to a copy of its namespace. glibc declares unshare only under _GNU_SOURCE.
 * Returns -1 with errno set on failure (EPERM without CAP_SYS_ADMIN). */
extern int unshare(int flags);
static inline int mamfs_unshare_mount_namespace(void) {
    return unshare(0x00020000 /* CLONE_NEWNS */);
}

/* close_range(2) (Linux 5.9+); glibc's wrapper is recent and _GNU_SOURCE-only. */
static inline int mamfs_close_range(unsigned int first, unsigned int last, unsigned int flags) {
    return (int)syscall(436 /* SYS_close_range */, first, last, flags);
}

/* Whether descriptor `targetfd` of process `pid`, a /dev/fuse descriptor, belongs to a FUSE
 * connection the kernel has aborted (its mount went, or its daemon died): 1 aborted, 0 not,
 * -1 with errno when it cannot be looked at (pidfd_getfd(2) needs ptrace access to `pid`:
 * EPERM for another user's process; ESRCH or EBADF when it exited or closed it meanwhile).
 * A duplicate of the descriptor is polled without waiting (POLLERR = aborted) and closed. */
#include <poll.h>
static inline int mamfs_fuse_descriptor_aborted(int pid, int targetfd) {
    int pidfd = (int)syscall(434 /* SYS_pidfd_open */, pid, 0);
    if (pidfd < 0) return -1;
    int fd = (int)syscall(438 /* SYS_pidfd_getfd */, pidfd, targetfd, 0);
    int saved = errno;
    close(pidfd);
    if (fd < 0) { errno = saved; return -1; }
    struct pollfd p = { fd, POLLIN, 0 };
    int n = poll(&p, 1, 0);
    saved = errno;
    close(fd);
    if (n < 0) { errno = saved; return -1; }
    return (n > 0 && (p.revents & POLLERR)) ? 1 : 0;
}

/* statx(2) of `path` below `dirfd` (following symlinks, as stat(2)): the identity of the file
 * it names. `device` is encoded as st_dev is (glibc's makedev), so it compares with stat(2)'s.
 * AT_STATX_DONT_SYNC: a network or FUSE filesystem answers from its cached attributes (an
 * executable on a FUSE mount is not asked for again by the daemon that serves that mount). */
#include <linux/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
struct mamfs_file_identity {
    unsigned long long device;
    unsigned long long inode;
    long long size;
    long long mtime_seconds;
    long long mtime_nanoseconds;
    unsigned long long mount_id;
    unsigned int links;
};
static inline int mamfs_file_identity_at(int dirfd, const char *path, struct mamfs_file_identity *out) {
    struct statx sx;
    if (syscall(SYS_statx, dirfd, path, 0x4000 /* AT_STATX_DONT_SYNC */, STATX_BASIC_STATS | 0x1000U /* STATX_MNT_ID */, &sx) != 0) return -1;
    out->device = gnu_dev_makedev(sx.stx_dev_major, sx.stx_dev_minor);
    out->inode = sx.stx_ino;
    out->size = (long long)sx.stx_size;
    out->mtime_seconds = sx.stx_mtime.tv_sec;
    out->mtime_nanoseconds = sx.stx_mtime.tv_nsec;
    out->mount_id = (sx.stx_mask & 0x1000U) ? sx.stx_mnt_id : 0;
    out->links = sx.stx_nlink;
    return 0;
}

/* The birth time of `name` below `dirfd`, not following a final symlink (statx STATX_BTIME):
 * 0 with seconds and nanoseconds set; 1 when the filesystem does not record it; -1 with errno
 * set on failure. */
static inline int mamfs_birth_time_at(int dirfd, const char *name, long long *seconds, unsigned int *nanoseconds) {
    struct statx sx;
    if (syscall(SYS_statx, dirfd, name, AT_SYMLINK_NOFOLLOW | 0x4000 /* AT_STATX_DONT_SYNC */, STATX_BTIME, &sx) != 0) return -1;
    if (!(sx.stx_mask & STATX_BTIME)) return 1;
    *seconds = sx.stx_btime.tv_sec;
    *nanoseconds = sx.stx_btime.tv_nsec;
    return 0;
}

/* Abstract unix stream sockets (a name in the network namespace, no file on any disk) for a
 * mount daemon's control channel, and the peer's credentials (SO_PEERCRED, whose struct ucred
 * glibc declares only under _GNU_SOURCE). Each returns -1 with errno set on failure. */
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>
#include <string.h>
static inline int mamfs_abstract_address(const char *name, struct sockaddr_un *address, socklen_t *length) {
    size_t n = strlen(name);
    if (n + 1 > sizeof(address->sun_path)) { errno = ENAMETOOLONG; return -1; }
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path + 1, name, n);
    *length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    return 0;
}
static inline int mamfs_abstract_listen(const char *name) {
    struct sockaddr_un address; socklen_t length;
    if (mamfs_abstract_address(name, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&address, length) != 0 || listen(fd, 8) != 0) {
        int saved = errno; close(fd); errno = saved; return -1;
    }
    return fd;
}
static inline int mamfs_abstract_connect(const char *name) {
    struct sockaddr_un address; socklen_t length;
    if (mamfs_abstract_address(name, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, length) != 0) { int saved = errno; close(fd); errno = saved; return -1; }
    return fd;
}
extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
static inline int mamfs_accept(int fd) { return accept4(fd, 0, 0, SOCK_CLOEXEC); }
struct mamfs_peer_credentials { int pid; unsigned int uid; unsigned int gid; };
static inline int mamfs_peer_credentials(int fd, struct mamfs_peer_credentials *out) {
    socklen_t length = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, out, &length);
}

/* fchmodat2(2) (Linux 6.6+) with AT_EMPTY_PATH: the mode of what `fd` (also an O_PATH
   descriptor) refers to, itself (a symlink is not followed). -1 with errno (ENOSYS before 6.6). */
static inline int mamfs_fchmodat2_empty(int fd, unsigned int mode) {
    return (int)syscall(452 /* SYS_fchmodat2 */, fd, "", mode, 0x1000 /* AT_EMPTY_PATH */);
}

/* getxattrat(2) (Linux 6.13+) of attribute `attribute` of `name` in `dirfd`, without following
   a final symlink: the value's length, or -1 with errno (ENOSYS before 6.13, ENODATA, ERANGE). */
struct mamfs_xattr_args { unsigned long long value; unsigned int size; unsigned int flags; };
static inline long mamfs_getxattrat_nofollow(int dirfd, const char *name, const char *attribute, void *value, unsigned int size) {
    struct mamfs_xattr_args args = { (unsigned long long)(unsigned long)value, size, 0 };
    return syscall(464 /* SYS_getxattrat */, dirfd, name, 0x100 /* AT_SYMLINK_NOFOLLOW */, attribute, &args, sizeof(args));
}

/* The calling thread's filesystem identity alone: raw system calls, since glibc's setgroups
   changes every thread of the process. setfsuid and setfsgid return the previous id; given
   (uid_t)-1 they change nothing and return the current one. setgroups: 0, or -1 with errno. */
static inline unsigned int mamfs_thread_setfsuid(unsigned int uid) {
    return (unsigned int)syscall(SYS_setfsuid, uid);
}
static inline unsigned int mamfs_thread_setfsgid(unsigned int gid) {
    return (unsigned int)syscall(SYS_setfsgid, gid);
}
static inline int mamfs_thread_setgroups(size_t count, const gid_t *groups) {
    return (int)syscall(SYS_setgroups, count, groups);
}

#endif
