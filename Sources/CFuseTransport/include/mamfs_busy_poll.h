#ifndef MAMFS_BUSY_POLL_H
#define MAMFS_BUSY_POLL_H

/*
 * Busy polling of a descriptor before a blocking read (busy_poll.c), per descriptor number
 * (0-1023). The FUSE transport calls mamfs_busy_poll_wait before each read(2) of /dev/fuse
 * and mamfs_busy_poll_received after each request read; any pollable descriptor (a pipe in
 * the tests) works the same way.
 */

/* The largest budget mamfs_busy_poll_set takes, in microseconds. */
#define mamfs_BUSY_POLL_MAX_US 1000

/* What mamfs_busy_poll_wait did. */
enum {
    mamfs_BUSY_POLL_OFF = -2,      /* no budget for this descriptor: the caller just reads */
    mamfs_BUSY_POLL_SKIPPED = -1,  /* another thread polls, or too many polls in a row timed out */
    mamfs_BUSY_POLL_MISSED = 0,    /* polled for the whole budget, nothing arrived */
    mamfs_BUSY_POLL_READY = 1      /* the descriptor became readable (or reports an error) */
};

/* Sets the budget of `fd` in microseconds (0 = off, at most mamfs_BUSY_POLL_MAX_US) and
   forgets its history. Returns 0, or -1 for a descriptor outside 0-1023 or a budget above the
   limit. */
int mamfs_busy_poll_set(int fd, unsigned int budget_us);

/* Notes that a worker begins to wait for a request on `fd`, then polls it for up to its budget
   unless polling is off, another thread polls it, or its last 8 polls timed out. Returns one
   of the values above. */
int mamfs_busy_poll_wait(int fd);

/* Notes that a request was read from `fd`; one that arrived within the budget of the moment
   the last worker began to wait (mamfs_busy_poll_wait) turns polling back on after misses. */
void mamfs_busy_poll_received(int fd);

#endif
