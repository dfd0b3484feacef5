#ifndef MAMFS_CSYSTEM_FILESYSTEM_H
#define MAMFS_CSYSTEM_FILESYSTEM_H
/* Whole-filesystem calls glibc declares only under _GNU_SOURCE (see shim.h for why it is not
 * defined here). */

/* syncfs(2), Linux 2.6.39+; reports writeback errors of the filesystem since Linux 5.8. */
extern int syncfs(int fd);

/* fstatfs(2) and struct statfs (f_type: the filesystem's magic number). */
#include <sys/vfs.h>

/* fanotify(7): fanotify_init(2), fanotify_mark(2) and the FAN_* flags. */
#include <sys/fanotify.h>

#endif
