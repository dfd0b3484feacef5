#!/usr/bin/env python3
"""What `tar x` of small files costs each FUSE daemon in each placement, request by request.

For each mount (the kinds of run.py: mamfs-enc, mamfs-plain, securefs, gocryptfs, bindfs, ...; with
--baseline, base-enc and base-plain of a second mamfs binary, for a before and after) and
each placement (`same`: daemon and client on CPU 0; `split`: daemon on CPU 1), extracts run.py's
tarball of N small files into the mount (caches dropped first) and reports:
- the wall clock and the daemon's CPU time (utime + stime of the process, seconds);
- the threads the daemon started and ended meanwhile (clone3/clone and exit system calls of
  the process and its threads, counted with `perf stat -p`; "-" without perf);
- the voluntary context switches of its threads (those alive at the end);
- with --latency, one more traced extraction per mount and placement: the requests sent by
  opcode and each opcode's median latency, from the kernel's `fuse_request_send` to its
  `fuse_request_end` (tracefs, kernel 6.14 or later; microseconds). Tracing slows every request,
  so the traced run's wall clock is not reported;
- with --cpu-time as well, where each request's time went, from the scheduler's switches on the
  daemon's CPU (sched:sched_switch) in that traced run: per opcode the mean latency, the mean
  time the daemon's own threads ran on its CPU, and the mean time that CPU was idle, between
  the request's send and its end (microseconds). In `split` the idle part is mostly the wakeup
  of the daemon's CPU; in `same` the rest of the latency is the client's own time.
Rounds are interleaved as in run.py. Prints one table per placement (medians over rounds) and
writes every sample as JSON (--out). Needs root.

The backing filesystem's recent history counts: ext4 without a journal passes over every inode
freed in the last 60 s (360 s while its inode table block is dirty) when it allocates one, so
a CREATE right after the `rm -rf` of another extraction costs more than one on a quiet disk.
The order alternates between rounds; the traced extraction is the last round's only.

usage: sudo Tools/bench/placement-cost.py [--mamfs PATH] [--baseline PATH] [--only NAME[,NAME]] [--rounds R]
                                          [--files N] [--dirs D] [--latency [--cpu-time]] [--busy-poll US]
                                          [--workdir DIR] [--out FILE]
"""
import argparse
import bisect
import collections
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuse_trace  # noqa: E402  (the request tracepoints)
import run as bench  # noqa: E402  (the mounts, placements and tree of run.py)

EVENTS = ["fuse_request_send", "fuse_request_end"]
SEND = re.compile(r"\s(\d+\.\d+): fuse_request_send: connection (\d+) req (\d+) opcode \d+ \((\w+)\)")
END = re.compile(r"\s(\d+\.\d+): fuse_request_end: connection (\d+) req (\d+) len")
SWITCH = re.compile(r"\[(\d+)\][^:]*\s(\d+\.\d+): sched_switch: .* ==> next_comm=(.*) next_pid=(\d+) next_prio")
THREAD_EVENTS = ["syscalls:sys_enter_clone3", "syscalls:sys_enter_clone", "syscalls:sys_enter_exit"]


def voluntary_switches(pid):
    """Sum of voluntary_ctxt_switches over the threads of `pid` alive now."""
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches:"))
        except (OSError, StopIteration):
            continue  # the thread ended between the listing and the read
    return total


class ThreadCount:
    """`perf stat -p PID` of thread starts and ends over a block; None without perf."""

    def __init__(self, pid, workdir):
        self.pid, self.out, self.process = pid, os.path.join(workdir, "perf-stat.csv"), None

    def __enter__(self):
        if shutil.which("perf"):
            self.process = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(THREAD_EVENTS), "-p", str(self.pid),
                                             "-o", self.out], stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf attaches to the existing threads before the workload starts
        return self

    def __exit__(self, *_):
        if self.process:
            self.process.send_signal(2)
            self.process.wait()

    def counts(self):
        if not self.process or not os.path.exists(self.out):
            return None
        found = {}
        with open(self.out) as f:
            for line in f:
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[2] in THREAD_EVENTS and fields[0].isdigit():
                    found[fields[2].split("_enter_")[1]] = int(fields[0])
        if not found:
            return None
        return dict(started=found.get("clone3", 0) + found.get("clone", 0), ended=found.get("exit", 0))


def daemon_comms(pid):
    """The names of the daemon's threads now (its workers, "mamfs-fuse", among them)."""
    names = set()
    for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            with open(comm) as f:
                names.add(f.read().strip())
        except OSError:
            continue
    return names


def traced(connection, command, cpu=None):
    """Runs `command` with both request tracepoints on: (requests, switches), requests a list of
    (opcode, send s, end s), switches (with `cpu`) the scheduler's switches on that CPU, a
    sorted list of (time s, next pid, next comm)."""
    sent, requests, switches = {}, [], []
    extra = ["sched/sched_switch"] if cpu is not None else []
    buffer_kib = 262144 if extra else 131072  # per CPU; the switches need room too
    for line in fuse_trace.lines(connection, EVENTS, bench.CLIENT + command, buffer_kib, "placement-cost", extra):
        m = SEND.search(line)
        if m:
            sent[m.group(3)] = (float(m.group(1)), m.group(4).removeprefix("FUSE_"))
            continue
        m = END.search(line)
        if m and m.group(3) in sent:
            start, opcode = sent.pop(m.group(3))
            requests.append((opcode, start, float(m.group(1))))
            continue
        m = SWITCH.search(line)
        if m and int(m.group(1)) == cpu:
            switches.append((float(m.group(2)), int(m.group(4)), m.group(3)))
    return requests, sorted(switches)


def cpu_split(requests, switches, comms):
    """Per opcode, the mean time (µs) the daemon's CPU ran the daemon's threads (`comms`) and
    was idle between each request's send and end: {opcode: (on_cpu, idle)}."""
    times = [t for t, _, _ in switches]
    parts = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for opcode, start, end in requests:
        i = bisect.bisect_right(times, start) - 1
        running = switches[i][1:] if i >= 0 else (None, "")
        t, on_cpu, idle = start, 0.0, 0.0
        for j in range(i + 1, len(switches) + 1):
            until = min(times[j], end) if j < len(switches) else end
            if running[1] in comms:
                on_cpu += until - t
            elif running[0] == 0:
                idle += until - t
            if until >= end:
                break
            t, running = until, switches[j][1:]
        p = parts[opcode]
        p[0], p[1], p[2] = p[0] + on_cpu, p[1] + idle, p[2] + 1
    return {op: (on * 1e6 / n, idle * 1e6 / n) for op, (on, idle, n) in parts.items()}


def extract(m, tarball, workdir, latency, cpu_time=False):
    """One `tar x` into a fresh directory of the mount; the sample, and the traced one."""
    target = os.path.join(m.mountpoint, "small")
    os.mkdir(target)
    bench.drop_caches()
    cpu0, switches0 = bench.proc_cpu_seconds(m.pid), voluntary_switches(m.pid)
    with ThreadCount(m.pid, workdir) as threads:
        wall = bench.timed(bench.CLIENT + ["tar", "-xf", tarball, "-C", target])
    sample = dict(wall_s=wall, daemon_cpu_s=bench.proc_cpu_seconds(m.pid) - cpu0,
                  voluntary_switches=voluntary_switches(m.pid) - switches0, threads=threads.counts())
    subprocess.run(["rm", "-rf", target], check=True)
    if latency:
        os.mkdir(target)
        bench.drop_caches()
        requests, switches = traced(fuse_trace.connection_of(m.mountpoint), ["tar", "-xf", tarball, "-C", target],
                                    m.cpu if cpu_time else None)
        lat = collections.defaultdict(list)
        for opcode, start, end in requests:
            lat[opcode].append((end - start) * 1e6)
        sample["requests"] = {op: len(v) for op, v in lat.items()}
        sample["median_us"] = {op: statistics.median(v) for op, v in lat.items()}
        if cpu_time:
            split = cpu_split(requests, switches, daemon_comms(m.pid))
            sample["cpu_time_us"] = {op: dict(mean=statistics.mean(lat[op]), on_cpu=on, idle=idle)
                                     for op, (on, idle) in split.items()}
        subprocess.run(["rm", "-rf", target], check=True)
    return sample


def report(results, names, placements, files):
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    for placement in placements:
        print(f"\n`{placement}`: tar x of {files} files, medians over rounds")
        print("| mount | wall s | daemon CPU s | threads started / ended | voluntary switches | requests |")
        print("|---|---|---|---|---|---|")
        for name in names:
            samples = results[placement][name]
            threads = [s["threads"] for s in samples if s["threads"]]
            started = f"{med([t['started'] for t in threads]):.0f} / {med([t['ended'] for t in threads]):.0f}" if threads else "-"
            requests = med([sum(s["requests"].values()) for s in samples if "requests" in s])
            print(f"| {name} | {med([s['wall_s'] for s in samples]):.2f} | {med([s['daemon_cpu_s'] for s in samples]):.2f} | "
                  f"{started} | {med([s['voluntary_switches'] for s in samples]):.0f} | "
                  f"{'-' if requests is None else f'{requests:.0f}'} |")
        traced = [n for n in names if any("median_us" in s for s in results[placement][n])]
        if traced:
            opcodes = sorted({op for n in traced for s in results[placement][n] for op in s.get("requests", {})},
                             key=lambda op: -max(s.get("requests", {}).get(op, 0) for n in traced for s in results[placement][n]))
            def latency(n, op):
                lat = med([s["median_us"].get(op) for s in results[placement][n] if "median_us" in s])
                count = med([s["requests"].get(op) for s in results[placement][n] if "requests" in s])
                return "-" if lat is None else f"{lat:.0f} ({count:.0f})"
            opcode_table(f"`{placement}`: median latency per request, µs (requests)", traced, opcodes, latency)
        split = [n for n in names if any("cpu_time_us" in s for s in results[placement][n])]
        if split:
            def cpu_time(n, op):
                found = [s["cpu_time_us"][op] for s in results[placement][n] if op in s.get("cpu_time_us", {})]
                return (f"{med([f['mean'] for f in found]):.0f} / {med([f['on_cpu'] for f in found]):.0f} / "
                        f"{med([f['idle'] for f in found]):.0f}" if found else "-")
            opcode_table(f"`{placement}`: mean latency / the daemon on its CPU / that CPU idle, µs", split, opcodes, cpu_time)


def opcode_table(title, names, opcodes, cell):
    """Prints a table of one row per opcode and one column per mount, `cell(name, opcode)` in each."""
    print(f"\n{title}")
    print("| opcode | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for op in opcodes:
        print(f"| {op} | " + " | ".join(cell(n, op) for n in names) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mamfs", default=os.path.join(bench.REPO, ".build/static/release/mamfs"))
    ap.add_argument("--baseline", help="a second mamfs binary, run as base-enc and base-plain (name them in --only)")
    ap.add_argument("--only", default="mamfs-enc,mamfs-plain,securefs,bindfs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=bench.FULL["files"])
    ap.add_argument("--dirs", type=int, default=bench.FULL["dirs"])
    ap.add_argument("--latency", action="store_true", help="also trace each request's latency (tracefs)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="with --latency: also where each request's time went on the daemon's CPU (sched_switch)")
    ap.add_argument("--busy-poll", type=int, default=100, metavar="US", help="mamfs-poll's -o busy_poll (run.py's default)")
    ap.add_argument("--workdir", default="/var/tmp", help="where the backing directories go (another filesystem: its own allocator)")
    ap.add_argument("--out")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("placement-cost: needs root (drop_caches, taskset of the daemons, tracefs)")
    if args.cpu_time and not args.latency:
        ap.error("--cpu-time needs --latency")
    if args.latency:
        fuse_trace.ensure(EVENTS, "placement-cost", "; run without --latency")
    mamfs = os.path.abspath(args.mamfs)
    baseline = os.path.abspath(args.baseline) if args.baseline else None
    names = args.only.split(",")
    if any(n in bench.BASELINE_MOUNTS for n in names) and not baseline:
        ap.error("base-enc and base-plain need --baseline PATH")
    placements = list(bench.PLACEMENTS)
    root = tempfile.mkdtemp(prefix="mamfs-placement-cost-", dir=args.workdir)
    results = {p: {n: [] for n in names} for p in placements}
    current = None
    try:
        tarball = os.path.join(root, "tree.tar")
        bench.make_tree_tarball(tarball, args.files, args.dirs)
        for r in range(args.rounds):
            order = [(p, n) for p in placements for n in names]
            for placement, name in (order if r % 2 == 0 else reversed(order)):
                binary = baseline if name in bench.BASELINE_MOUNTS else mamfs
                current = bench.Mount(name, placement, root, binary, dict(bench.FULL, files=args.files, dirs=args.dirs,
                                                                                   busy_poll_us=args.busy_poll))
                current.start()
                sample = extract(current, tarball, root, args.latency and r == args.rounds - 1, args.cpu_time)
                current.stop()
                shutil.rmtree(current.base, ignore_errors=True)
                current = None
                results[placement][name].append(sample)
                bench.log(f"round {r + 1} {placement} {name}: {sample['wall_s']:.2f} s, daemon CPU {sample['daemon_cpu_s']:.2f} s")
    finally:
        if current:
            current.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(results, names, placements, args.files)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(files=args.files, dirs=args.dirs, mamfs=mamfs, results=results), f, indent=2)


if __name__ == "__main__":
    main()
