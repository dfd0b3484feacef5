"""The kernel's FUSE request tracepoints (tracefs: fuse:fuse_request_send and
fuse:fuse_request_end, kernel 6.14 or later), shared by the bench's request tools
(fuse-requests.py, placement-cost.py). Needs root."""
import glob
import os
import subprocess
import sys

TRACING = "/sys/kernel/tracing"


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _event(name):
    return f"{TRACING}/events/fuse/{name}"


def ensure(events, tool, advice=""):
    """Mounts tracefs when it is not; exits naming `tool` (and `advice`) when one of the fuse
    `events` is not there."""
    if not all(os.path.isdir(_event(e)) for e in events):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], stderr=subprocess.DEVNULL)
    missing = [e for e in events if not os.path.isdir(_event(e))]
    if missing:
        sys.exit(f"{tool}: no fuse:{missing[0]} tracepoint (tracefs at {TRACING}, kernel 6.14+){advice}")


def connection_of(mountpoint):
    """The FUSE connection number the tracepoints name: the kernel's dev_t of the mount
    (major << 20 | minor, not the st_dev encoding of user space)."""
    dev = os.stat(mountpoint).st_dev
    return (os.major(dev) << 20) | os.minor(dev)


def lines(connection, events, command, buffer_kib, tool, unfiltered=()):
    """Runs `command` (a list, run to completion) with the fuse `events` on for `connection`
    and the `unfiltered` events ("sched/sched_switch") on for everything; the trace's lines.
    Exits naming `tool` when a CPU's trace buffer overran."""
    _write(TRACING + "/buffer_size_kb", str(buffer_kib))
    _write(TRACING + "/trace", "")
    switches = [_event(e) for e in events] + [f"{TRACING}/events/{e}" for e in unfiltered]
    for event in events:
        _write(_event(event) + "/filter", f"connection == {connection}")
    for path in switches:
        _write(path + "/enable", "1")
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    finally:
        for path in switches:
            _write(path + "/enable", "0")
    for stats in glob.glob(TRACING + "/per_cpu/cpu*/stats"):
        with open(stats) as f:
            if any(l.startswith("overrun:") and l.split()[1] != "0" for l in f):
                sys.exit(f"{tool}: the trace buffer overran; use fewer --files")
    with open(TRACING + "/trace") as f:
        return f.readlines()
