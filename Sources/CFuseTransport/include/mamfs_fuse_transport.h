#ifndef MAMFS_FUSE_TRANSPORT_H
#define MAMFS_FUSE_TRANSPORT_H

struct fuse_session;

/*
 * Gives a mounted libfuse session (fuse_session_fd is its /dev/fuse descriptor) the transport
 * of transport.c: plain read/writev/splice, except that libfuse's INIT reply asks the kernel
 * for FUSE_DIRECT_IO_ALLOW_MMAP when the kernel offers it (libfuse 3.14 cannot), so handles
 * opened with FOPEN_DIRECT_IO can be mapped MAP_SHARED, and for FUSE_HANDLE_KILLPRIV_V2.
 * `busy_poll_us` (0 = off, at most 1000): how long a worker polls /dev/fuse before it blocks
 * in read(2) (mamfs_busy_poll.h).
 * Returns 0, or a negative errno: -EINVAL for a budget above 1000 us, or from
 * fuse_session_custom_io (-ENOMEM).
 */
int mamfs_fuse_use_transport(struct fuse_session *se, unsigned int busy_poll_us);

#endif
