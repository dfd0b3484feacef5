#define _GNU_SOURCE /* splice(2) */
#define FUSE_USE_VERSION 312
#include "mamfs_fuse_transport.h"
#include "mamfs_busy_poll.h"
#include <fuse3/fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/*
 * The session's transport (fuse_session_custom_io): plain read/writev/splice on /dev/fuse,
 * with one addition: two INIT flags libfuse 3.14 cannot ask for.
 * - FUSE_DIRECT_IO_ALLOW_MMAP (protocol 7.39, kernel 6.6: bit 36 of the INIT flags, that is
 *   bit 4 of flags2), without which the kernel refuses MAP_SHARED on a handle opened with
 *   FOPEN_DIRECT_IO (mmap answers ENODEV). Added only if the reply carries FUSE_INIT_EXT, so
 *   the kernel reads flags2.
 * - FUSE_HANDLE_KILLPRIV_V2 (protocol 7.33, bit 28; libfuse 3.14 knows only the first
 *   version): the server drops set-ID bits and file capabilities on write, truncate and chown
 *   itself, so the kernel marks the superblock SB_NOSEC and stops asking for
 *   `security.capability` (a GETXATTR) before every write. mamfs drops set-ID bits itself
 *   (OverlayFilesystem.clearSetIDBits), chown and writes of the backing file drop them and
 *   capabilities there.
 * When the kernel's INIT request offers a flag, the transport notes the request's unique id and
 * the offered flags, and adds them to libfuse's INIT reply to that id. Every other message
 * passes through unchanged. Layouts: include/uapi/linux/fuse.h.
 * With a busy-poll budget (-o busy_poll=US), a worker polls the descriptor briefly before it
 * blocks in read(2) (busy_poll.c).
 */
enum {
    mamfs_FUSE_INIT_OPCODE = 26,
    mamfs_FUSE_IN_HEADER_SIZE = 40,         /* len, opcode, unique, nodeid, uid, gid, pid, extlen, pad */
    mamfs_FUSE_OUT_HEADER_SIZE = 16,        /* len, error, unique */
    mamfs_FUSE_INIT_IN_FLAGS = 12,          /* fuse_init_in: major, minor, max_readahead, flags, flags2 */
    mamfs_FUSE_INIT_IN_FLAGS2 = 16,
    mamfs_FUSE_INIT_OUT_FLAGS = 12,         /* fuse_init_out: ..., flags at 12, flags2 at 32 */
    mamfs_FUSE_INIT_OUT_FLAGS2 = 32,
    mamfs_FUSE_INIT_EXT = 1u << 30,
    mamfs_FUSE_FLAGS2_DIRECT_IO_ALLOW_MMAP = 1u << 4,
    mamfs_FUSE_HANDLE_KILLPRIV_V2 = 1u << 28,
    mamfs_FUSE_TRANSPORT_FDS = 1024
};

/* Per /dev/fuse descriptor (fd < mamfs_FUSE_TRANSPORT_FDS): the unique id of an INIT request
   that offered a flag, else 0, and which of the flags it offered (mamfs_OFFERED_*). */
static _Atomic uint64_t pending[mamfs_FUSE_TRANSPORT_FDS];
static _Atomic uint32_t offered_flags[mamfs_FUSE_TRANSPORT_FDS];
enum { mamfs_OFFERED_ALLOW_MMAP = 1, mamfs_OFFERED_KILLPRIV_V2 = 2 };

static uint32_t mamfs_load32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t mamfs_load64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Names the calling thread "mamfs-fuse" the first time it reads a request. Only the session's
   workers read /dev/fuse, so `ps -L`, `top -H` and /proc/PID/task/TID/comm tell them from the
   daemon's other threads (the main thread, signal and timer helpers, Dispatch's). */
static void mamfs_name_worker(void) {
    static __thread int named;
    if (!named) {
        named = 1;
        pthread_setname_np(pthread_self(), "mamfs-fuse");
    }
}

static ssize_t mamfs_fuse_transport_read(int fd, void *buf, size_t len, void *userdata) {
    (void)userdata;
    mamfs_name_worker();
    mamfs_busy_poll_wait(fd);
    ssize_t n = read(fd, buf, len);
    if (n > 0) mamfs_busy_poll_received(fd);
    const unsigned char *p = (const unsigned char *)buf;
    if (n >= mamfs_FUSE_IN_HEADER_SIZE + mamfs_FUSE_INIT_IN_FLAGS2 + 4 && fd >= 0 && fd < mamfs_FUSE_TRANSPORT_FDS
        && mamfs_load32(p + 4) == mamfs_FUSE_INIT_OPCODE) {
        const unsigned char *body = p + mamfs_FUSE_IN_HEADER_SIZE;
        uint32_t flags = mamfs_load32(body + mamfs_FUSE_INIT_IN_FLAGS);
        uint32_t offered = 0;
        if ((flags & mamfs_FUSE_INIT_EXT) && (mamfs_load32(body + mamfs_FUSE_INIT_IN_FLAGS2) & mamfs_FUSE_FLAGS2_DIRECT_IO_ALLOW_MMAP))
            offered |= mamfs_OFFERED_ALLOW_MMAP;
        if (flags & mamfs_FUSE_HANDLE_KILLPRIV_V2)
            offered |= mamfs_OFFERED_KILLPRIV_V2;
        atomic_store(&offered_flags[fd], offered);
        atomic_store(&pending[fd], offered ? mamfs_load64(p + 8) : 0);
    }
    return n;
}

static ssize_t mamfs_fuse_transport_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    if (fd >= 0 && fd < mamfs_FUSE_TRANSPORT_FDS && count >= 2 && iov[0].iov_len == mamfs_FUSE_OUT_HEADER_SIZE
        && atomic_load_explicit(&pending[fd], memory_order_relaxed) != 0) {
        const unsigned char *out = (const unsigned char *)iov[0].iov_base;
        uint64_t unique = mamfs_load64(out + 8);
        if (unique == atomic_load(&pending[fd])) {
            atomic_store(&pending[fd], 0);
            unsigned char *body = (unsigned char *)iov[1].iov_base;
            uint32_t offered = atomic_load(&offered_flags[fd]);
            if (mamfs_load32(out + 4) == 0 && iov[1].iov_len >= mamfs_FUSE_INIT_OUT_FLAGS2 + 4) {
                uint32_t flags = mamfs_load32(body + mamfs_FUSE_INIT_OUT_FLAGS);
                if (offered & mamfs_OFFERED_KILLPRIV_V2) {
                    flags |= mamfs_FUSE_HANDLE_KILLPRIV_V2;
                    memcpy(body + mamfs_FUSE_INIT_OUT_FLAGS, &flags, 4);
                }
                if ((offered & mamfs_OFFERED_ALLOW_MMAP) && (flags & mamfs_FUSE_INIT_EXT)) {
                    uint32_t flags2 = mamfs_load32(body + mamfs_FUSE_INIT_OUT_FLAGS2) | mamfs_FUSE_FLAGS2_DIRECT_IO_ALLOW_MMAP;
                    memcpy(body + mamfs_FUSE_INIT_OUT_FLAGS2, &flags2, 4);
                }
            }
        }
    }
    return writev(fd, iov, count);
}

static ssize_t mamfs_fuse_transport_splice(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                                  unsigned int flags, void *userdata) {
    (void)userdata;
    return splice(fdin, offin, fdout, offout, len, flags);
}

static ssize_t mamfs_fuse_transport_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                                   unsigned int flags, void *userdata) {
    mamfs_name_worker();
    return mamfs_fuse_transport_splice(fdin, offin, fdout, offout, len, flags, userdata);
}

/* Gives `se` (mounted: fuse_session_fd is its /dev/fuse descriptor) the transport above, with
   a busy-poll budget of `busy_poll_us` microseconds (0 = off).
   Returns 0 or a negative errno (fuse_session_custom_io's; -EINVAL for a budget above
   mamfs_BUSY_POLL_MAX_US or a descriptor above 1023 with a budget). */
int mamfs_fuse_use_transport(struct fuse_session *se, unsigned int busy_poll_us) {
    struct fuse_custom_io io = {
        .writev = mamfs_fuse_transport_writev,
        .read = mamfs_fuse_transport_read,
        .splice_receive = mamfs_fuse_transport_splice_receive,
        .splice_send = mamfs_fuse_transport_splice,
    };
    int fd = fuse_session_fd(se);
    if (mamfs_busy_poll_set(fd, busy_poll_us) != 0 && busy_poll_us != 0) return -EINVAL;
    return fuse_session_custom_io(se, &io, fd);
}

