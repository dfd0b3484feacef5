#ifndef MAMFS_FUSE_SHIM_H
#define MAMFS_FUSE_SHIM_H
#define FUSE_USE_VERSION 312
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <fuse3/fuse_lowlevel.h>

/* FUSE_ROOT_ID is a macro Swift does not import. */
static const unsigned long mamfs_FUSE_ROOT_ID = FUSE_ROOT_ID;

/* Writes a diagnostic line to stderr (Swift 6 rejects the global `stderr`). */
static inline void mamfs_log_line(const char *line) {
    fputs(line, stderr);
    fflush(stderr);
}
static inline void mamfs_flush_stdio(void) {
    fflush(NULL);
}

/* What MountCommand still takes from here: glibc declares them only under _GNU_SOURCE, which
   this module must not define (its glibc structs would then differ from SwiftGlibc's). The
   overlay itself takes such constants and calls from MAMSystem. Values from the kernel's UAPI
   headers. */
static const int mamfs_fuse_RLIMIT_NOFILE = 7;
static inline int mamfs_fuse_close_range(unsigned int first, unsigned int last, unsigned int flags) {
    return (int)syscall(SYS_close_range, first, last, flags);
}
#endif
