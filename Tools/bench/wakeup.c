/*
 * What a request's round trip costs in wakeups alone, without FUSE: a one-byte pipe ping-pong
 * between a client pinned to CPU 0 and a server on CPU 0 (`same`) or CPU 1 (`split`), the
 * server either sleeping in read(2) or polling the pipe first (poll(2) with a zero timeout and
 * sched_yield(2), as `mamfs mount -o busy_poll=US` polls /dev/fuse).
 * docs/PERFORMANCE.md ("The wakeup of the daemon's CPU").
 *
 *   cc -O2 -o wakeup Tools/bench/wakeup.c && ./wakeup [ROUND_TRIPS]
 *
 * Prints one line per case: microseconds per round trip (median of 5 runs).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
}

static void must(int ok, const char *what) {
    if (!ok) {
        perror(what);
        exit(1);
    }
}

/* One run: `trips` round trips, the server on `server_cpu` polling `poll_us` before each read. */
static double run(int server_cpu, int poll_us, int trips) {
    int request[2], reply[2];
    must(pipe(request) == 0 && pipe(reply) == 0, "pipe");
    pid_t pid = fork();
    must(pid >= 0, "fork");
    char byte = 'x';
    if (pid == 0) {
        pin(server_cpu);
        struct pollfd p = { .fd = request[0], .events = POLLIN };
        for (int i = 0; i < trips; i++) {
            if (poll_us > 0) {
                double deadline = now() + poll_us / 1e6;
                while (poll(&p, 1, 0) == 0 && now() < deadline) sched_yield();
            }
            if (read(request[0], &byte, 1) != 1 || write(reply[1], &byte, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    pin(0);
    double start = now();
    for (int i = 0; i < trips; i++)
        must(write(request[1], &byte, 1) == 1 && read(reply[0], &byte, 1) == 1, "ping-pong");
    double elapsed = now() - start;
    int status = 0;
    must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "server");
    close(request[0]); close(request[1]); close(reply[0]); close(reply[1]);
    return elapsed / trips * 1e6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int trips = argc > 1 ? atoi(argv[1]) : 20000;
    if (trips <= 0) {
        fprintf(stderr, "usage: wakeup [ROUND_TRIPS > 0]\n");
        return 64;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "wakeup: needs two CPUs\n");
        return 69;
    }
    static const struct { const char *name; int cpu, poll_us; } cases[] = {
        { "same, server sleeps in read", 0, 0 },
        { "same, server polls 50 us", 0, 50 },
        { "split, server sleeps in read", 1, 0 },
        { "split, server polls 50 us", 1, 50 },
        { "split, server polls 100 us", 1, 100 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double runs[5];
        for (int r = 0; r < 5; r++) runs[r] = run(cases[c].cpu, cases[c].poll_us, trips);
        qsort(runs, 5, sizeof runs[0], by_value);
        printf("%-30s %6.1f us per round trip (%.1f-%.1f)\n", cases[c].name, runs[2], runs[0], runs[4]);
    }
    return 0;
}
