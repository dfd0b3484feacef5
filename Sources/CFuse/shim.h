#ifndef MAMFS_FUSE_SHIM_H
#define MAMFS_FUSE_SHIM_H
#define FUSE_USE_VERSION 312
#include <stddef.h>
#include <stdio.h>
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

#endif
