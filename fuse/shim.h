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

/* Linux constants and calls glibc only declares under _GNU_SOURCE. This module must not define
   _GNU_SOURCE (its glibc structs would then differ from SwiftGlibc's), so MAMFS takes them
   from here rather than from CSystem. Values from the kernel's UAPI headers. */
static const int mamfs_fuse_O_PATH = 010000000;
static const int mamfs_fuse_AT_EMPTY_PATH = 0x1000;
static const long mamfs_fuse_UTIME_NOW = (1l << 30) - 1l;
static const long mamfs_fuse_UTIME_OMIT = (1l << 30) - 2l;
static const int mamfs_fuse_SEEK_DATA = 3;
static const int mamfs_fuse_SEEK_HOLE = 4;
static const int mamfs_fuse_RLIMIT_NOFILE = 7;
static const unsigned int mamfs_fuse_RENAME_NOREPLACE = 1u;
static const unsigned int mamfs_fuse_RENAME_EXCHANGE = 2u;
static inline int mamfs_fuse_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}
static inline int mamfs_fuse_close_range(unsigned int first, unsigned int last, unsigned int flags) {
    return (int)syscall(SYS_close_range, first, last, flags);
}
#endif
