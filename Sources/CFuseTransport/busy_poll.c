#include "mamfs_busy_poll.h"
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/*
 * Busy polling of a /dev/fuse descriptor (`-o busy_poll=US`), in the spirit of the kernel's
 * net.core.busy_poll: before a worker blocks in read(2), one worker at a time polls the
 * descriptor (poll(2) with a zero timeout, sched_yield(2) between tries) for up to the budget.
 * A request that arrives meanwhile is read without a wakeup of a sleeping thread; on a CPU that
 * would otherwise go idle that wakeup is the largest part of a request's round trip
 * (docs/PERFORMANCE.md: 50 us against 12-20 us for a pipe ping-pong across two CPUs of the
 * benchmark machine).
 *
 * It adapts so a mount that is idle or sees sparse requests does not burn CPU:
 * after mamfs_BUSY_POLL_MAX_MISSES polls in a row that timed out it stops polling, and starts
 * again once a request arrives within the budget of the moment the last worker began to wait
 * for one (so a poll would have caught it). Requests that keep coming a little later than the
 * budget therefore never turn it back on.
 */
enum { mamfs_BUSY_POLL_FDS = 1024, mamfs_BUSY_POLL_MAX_MISSES = 8 };

struct mamfs_busy_poll_state {
    _Atomic int64_t budget_ns;        /* 0: off */
    _Atomic int64_t waiting_since_ns; /* CLOCK_MONOTONIC when a worker last began to wait, 0: never */
    _Atomic int misses;               /* polls in a row that timed out */
    _Atomic int polling;              /* 1 while a worker polls */
};

static struct mamfs_busy_poll_state states[mamfs_BUSY_POLL_FDS];

static int64_t mamfs_monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int mamfs_busy_poll_set(int fd, unsigned int budget_us) {
    if (fd < 0 || fd >= mamfs_BUSY_POLL_FDS || budget_us > mamfs_BUSY_POLL_MAX_US) return -1;
    struct mamfs_busy_poll_state *s = &states[fd];
    atomic_store(&s->misses, 0);
    atomic_store(&s->waiting_since_ns, 0);
    atomic_store(&s->polling, 0);
    atomic_store(&s->budget_ns, (int64_t)budget_us * 1000);
    return 0;
}

int mamfs_busy_poll_wait(int fd) {
    if (fd < 0 || fd >= mamfs_BUSY_POLL_FDS) return mamfs_BUSY_POLL_OFF;
    struct mamfs_busy_poll_state *s = &states[fd];
    int64_t budget = atomic_load_explicit(&s->budget_ns, memory_order_relaxed);
    if (budget == 0) return mamfs_BUSY_POLL_OFF;
    int64_t start = mamfs_monotonic_ns();
    atomic_store_explicit(&s->waiting_since_ns, start, memory_order_relaxed);
    if (atomic_load_explicit(&s->misses, memory_order_relaxed) >= mamfs_BUSY_POLL_MAX_MISSES)
        return mamfs_BUSY_POLL_SKIPPED;
    if (atomic_exchange_explicit(&s->polling, 1, memory_order_acquire)) return mamfs_BUSY_POLL_SKIPPED;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int result = mamfs_BUSY_POLL_MISSED;
    for (;;) {
        /* Ready, or an error (the mount is gone: read(2) reports it). */
        if (poll(&p, 1, 0) != 0) { result = mamfs_BUSY_POLL_READY; break; }
        if (mamfs_monotonic_ns() - start >= budget) break;
        sched_yield();
    }
    if (result == mamfs_BUSY_POLL_READY) atomic_store_explicit(&s->misses, 0, memory_order_relaxed);
    else atomic_fetch_add_explicit(&s->misses, 1, memory_order_relaxed);
    atomic_store_explicit(&s->polling, 0, memory_order_release);
    return result;
}

void mamfs_busy_poll_received(int fd) {
    if (fd < 0 || fd >= mamfs_BUSY_POLL_FDS) return;
    struct mamfs_busy_poll_state *s = &states[fd];
    int64_t budget = atomic_load_explicit(&s->budget_ns, memory_order_relaxed);
    if (budget == 0) return;
    int64_t since = atomic_load_explicit(&s->waiting_since_ns, memory_order_relaxed);
    if (since != 0 && mamfs_monotonic_ns() - since <= budget) atomic_store_explicit(&s->misses, 0, memory_order_relaxed);
}
